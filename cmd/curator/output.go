package main

// What the operator commands (node, cluster, token) share: connecting to the
// cluster, the -o flag, enum words, JSON and table writing, and how API
// errors read.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/client"
)

// callTimeout bounds one operator command's talk with the cluster: long
// enough to try every manager and ride out a leader election, short enough
// that a dead cluster gets an answer.
const callTimeout = 30 * time.Second

// configPath is --config, or the default when it is not given.
func (g *globalFlags) configPath() string {
	if g.config != "" {
		return g.config
	}
	return client.DefaultConfigPath()
}

// showAnswer is a read-only command's whole work: one call with the
// client (a method expression, or a func of the same shape; within
// callTimeout), its answer written to stdout by write, a
// failure said as "WHAT: ...".
func showAnswer[T any](g *globalFlags, cmd *cobra.Command, what string, call func(*client.Client, context.Context) (T, error), write func(context.Context, *client.Client, io.Writer, T) error) error {
	return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
		answer, err := call(c, ctx)
		if err != nil {
			return apiError(what, err)
		}
		return write(ctx, c, cmd.OutOrStdout(), answer)
	})
}

// withClient loads the client config, dials the cluster and runs fn with a
// context bounded by callTimeout.
func (g *globalFlags) withClient(cmd *cobra.Command, fn func(context.Context, *client.Client) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), callTimeout)
	defer cancel()
	return g.dial(ctx, fn)
}

// leaderWait is how long an operator command waits out a leader hand-over
// (every manager says no curator leader is elected), saying so on stderr,
// before it fails: an election takes about an election TTL.
const leaderWait = 20 * time.Second

// note writes what the client says it waits for to stderr.
func (g *globalFlags) note(msg string) {
	fmt.Fprintln(cmp.Or[io.Writer](g.stderr, os.Stderr), "curator: "+msg)
}

// dial loads the client config and runs fn with a client of the cluster.
// The client waits out a leader hand-over (up to leaderWait), and the
// watches (--watch, --follow) wait for managers to come back when none
// answers, until Ctrl-C; opts come after and may undo either.
func (g *globalFlags) dial(ctx context.Context, fn func(context.Context, *client.Client) error, opts ...client.Option) error {
	opts = append([]client.Option{client.WithLeaderWait(leaderWait, g.note), client.WithFollowUntilCancelled(g.note)}, opts...)
	path := g.configPath()
	cfg, err := client.LoadConfig(path)
	if err != nil {
		return err
	}
	c, err := client.Dial(ctx, cfg, path, opts...)
	if err != nil {
		return devQuorumAdvice(path, err)
	}
	defer c.Close()
	return devQuorumAdvice(path, fn(ctx, c))
}

// apiError makes an error from the management API read as the server's
// message with its code, instead of gRPC's "rpc error: code = ... desc = ...".
func apiError(what string, err error) error {
	if errors.Is(err, client.ErrNoManager) {
		return fmt.Errorf("%s: %w", what, err)
	}
	if st, ok := status.FromError(err); ok {
		if st.Code() == codes.PermissionDenied && strings.Contains(st.Message(), " role; the certificate ") {
			// A role's limit, not a failure: say what the certificate
			// may not do (docs/operators.md).
			return fmt.Errorf("%s: not allowed with this certificate: %s", what, strings.TrimPrefix(st.Message(), "permission denied: "))
		}
		return fmt.Errorf("%s: %s (%s)", what, st.Message(), st.Code())
	}
	return fmt.Errorf("%s: %w", what, err)
}

// parentCommand is a command that only groups others. Run alone it prints
// its help; run with an unknown subcommand it fails (see strictTree, which
// makes every command with subcommands behave so).
func parentCommand(use, short string, children ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short}
	c.AddCommand(children...)
	return c
}

// outputFormat is the value of -o. Set refuses anything else, so a bad -o
// fails before the command talks to the cluster.
type outputFormat string

const (
	formatTable outputFormat = "table"
	formatJSON  outputFormat = "json"
	formatYAML  outputFormat = "yaml"
)

var outputFormats = []string{string(formatTable), string(formatJSON), string(formatYAML)}

func (f *outputFormat) String() string { return string(*f) }
func (f *outputFormat) Type() string   { return "format" }

func (f *outputFormat) Set(s string) error {
	switch outputFormat(s) {
	case formatTable, formatJSON, formatYAML:
		*f = outputFormat(s)
		return nil
	}
	return fmt.Errorf("output format %q is not one of %s", s, strings.Join(outputFormats, ", "))
}

// structured says whether f is a data format (JSON, YAML) rather than
// the table for people.
func (f outputFormat) structured() bool { return f == formatJSON || f == formatYAML }

// addOutputFlag adds -o/--output to cmd, defaulting to table.
func addOutputFlag(cmd *cobra.Command, f *outputFormat) {
	addOutputFlagDefault(cmd, f, formatTable)
}

// addOutputFlagDefault adds -o/--output to cmd, defaulting to def.
func addOutputFlagDefault(cmd *cobra.Command, f *outputFormat, def outputFormat) {
	*f = def
	cmd.Flags().VarP(f, "output", "o", "output format: "+strings.Join(outputFormats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
}

// enumWord is how a proto enum value reads in the CLI: its name without the
// enum's prefix, in lowercase (NODE_STATUS_READY → "ready",
// AVAILABILITY_DRAIN → "drain"). The zero value of an enum whose zero means
// "not set" (…_UNSPECIFIED, MANAGER_STATUS_NONE) reads as "". A number the
// CLI does not know (a newer server) reads as the number.
func enumWord(e protoreflect.Enum) string {
	v := e.Descriptor().Values().ByNumber(e.Number())
	if v == nil {
		return fmt.Sprint(int32(e.Number()))
	}
	name := string(v.Name())
	prefix := enumPrefix(string(e.Descriptor().Name()))
	word := strings.ToLower(strings.TrimPrefix(name, prefix))
	if e.Number() == 0 && (word == "unspecified" || word == "none") {
		return ""
	}
	return word
}

// enumPrefix turns an enum's type name into the prefix of its values, by the
// proto style guide: NodeStatus → NODE_STATUS_.
func enumPrefix(typeName string) string {
	var b strings.Builder
	for i, r := range typeName {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String()) + "_"
}

// timeOrNil is a proto timestamp as JSON will show it: RFC 3339 in UTC, or
// null when unset.
func timeOrNil(ts *timestamppb.Timestamp) *time.Time {
	if ts == nil {
		return nil
	}
	t := ts.AsTime().UTC()
	return &t
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeData writes v as JSON or YAML (format is structured). YAML has the
// JSON's field names, in the same order: it is the same data.
func writeData(w io.Writer, format outputFormat, v any) error {
	if format != formatYAML {
		return writeJSON(w, v)
	}
	out, err := yamlOf(v)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// yamlOf is v as YAML, by way of its JSON (YAML reads JSON, and keeps the
// order of its keys), in block style.
func yamlOf(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	blockStyle(&doc)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// blockStyle clears the flow and quoting styles JSON's syntax gave the
// nodes: the encoder then quotes only what needs it. Empty lists and maps
// stay [] and {}.
func blockStyle(n *yaml.Node) {
	if (n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode) && len(n.Content) == 0 {
		n.Style = yaml.FlowStyle
		return
	}
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// writeTable writes rows as aligned columns, three spaces apart, without
// the trailing blanks tabwriter leaves after empty last cells.
func writeTable(w io.Writer, rows [][]string) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 3, ' ', 0)
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, cell := range row {
			cells[i] = tableCell(cell)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var out strings.Builder
	for line := range strings.Lines(buf.String()) {
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// tableCell shows a cell with a control character (a newline would forge a
// row, a tab a column) quoted, Go-style. The cluster refuses such names and
// labels; this keeps a record written before it did from misleading.
func tableCell(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// count is n of noun, the noun in the plural unless n is 1: "1 node",
// "3 nodes" (for nouns whose plural adds an s).
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// withArticle is word with "a" or "an" before it, by its first letter:
// "an operator", "a reader".
func withArticle(word string) string {
	if word != "" && strings.ContainsRune("aeiouAEIOU", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}
