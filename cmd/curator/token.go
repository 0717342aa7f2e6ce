package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
)

func newTokenCommand(g *globalFlags) *cobra.Command {
	return parentCommand("token", "Show and rotate join tokens",
		newTokenShowCommand(g),
		newTokenRotateCommand(g),
	)
}

func newTokenShowCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:       "show worker|manager",
		Short:     "Print the join token for workers or managers",
		Args:      cobra.MatchAll(cobra.ExactArgs(1), tokenRoleArg),
		ValidArgs: client.TokenRoles,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				token, err := c.Token(ctx, args[0])
				if err != nil {
					return apiError("show "+args[0]+" token", err)
				}
				return printToken(cmd, token)
			})
		},
	}
}

func newTokenRotateCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:       "rotate worker|manager",
		Short:     "Replace the join token for workers or managers and print the new one",
		Long:      "Replace the join token for workers or managers and print the new one.\nThe old token is refused from now on; nodes that joined with it are unaffected.",
		Args:      cobra.MatchAll(cobra.ExactArgs(1), tokenRoleArg),
		ValidArgs: client.TokenRoles,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				token, err := c.RotateToken(ctx, args[0])
				if err != nil {
					return apiError("rotate "+args[0]+" token", err)
				}
				return printToken(cmd, token)
			})
		},
	}
}

// tokenRoleArg checks the role before anything is sent, so a typo rotates
// nothing.
func tokenRoleArg(_ *cobra.Command, args []string) error {
	return client.CheckTokenRole(args[0])
}

// printToken prints the token alone on one line, for scripts:
// TOKEN=$(curator token show worker). The client has checked that it is
// one word.
func printToken(cmd *cobra.Command, token string) error {
	_, err := fmt.Fprintln(cmd.OutOrStdout(), token)
	return err
}
