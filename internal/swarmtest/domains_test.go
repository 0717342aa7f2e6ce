package swarmtest

import (
	"context"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// TestCutAndHeal: an engine Cut does not answer its API (its network is
// down too: the end-to-end test of domains sees its nodes go); Healed,
// it answers again.
func TestCutAndHeal(t *testing.T) {
	c := Start(t, Config{Spare: 2, NoSwarm: true})
	a, b := c.Engines[0], c.Engines[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ping := func(e *Engine) error {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		_, err := e.Client.Ping(pctx, client.PingOptions{})
		return err
	}
	if err := b.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ping(b); err == nil {
		t.Error("engine b answers its API while cut")
	}
	if err := ping(a); err != nil {
		t.Errorf("engine a does not answer while b is cut: %v", err)
	}
	if err := b.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ping(b); err != nil {
		t.Errorf("engine b does not answer once healed: %v", err)
	}
}
