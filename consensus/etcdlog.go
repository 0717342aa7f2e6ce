package consensus

import (
	"slices"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdSignals are facts that etcd only tells its log. The embed API reports
// neither that this member was removed from the cluster (the server stops
// itself, and only logs why) nor that its peers belong to another cluster
// (rafthttp logs it and retries forever), so we read them off etcd's logger.
type etcdSignals struct {
	// removed: etcd stopped because this member is no longer in the
	// cluster ("the member has been permanently removed from the cluster").
	removed atomic.Bool
	// otherCluster: a peer refused our messages as coming from another
	// cluster ("request sent was ignored ... due to cluster ID mismatch").
	// Only the sending side counts: a receiving member that logs it is the
	// healthy one.
	otherCluster atomic.Bool
}

// etcdLogger returns the logger for one etcd run: base named "etcd",
// filtered to level, teed into a core that records sig.
func etcdLogger(base *zap.Logger, level zapcore.LevelEnabler, sig *etcdSignals) *zap.Logger {
	return base.Named("etcd").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewTee(levelCore{Core: c, level: level}, signalCore{sig: sig})
	}))
}

// levelCore drops entries below level. Unlike zapcore.NewIncreaseLevelCore it
// also accepts a level lower than the wrapped core's (which then still
// filters on its own).
type levelCore struct {
	zapcore.Core
	level zapcore.LevelEnabler
}

func (c levelCore) Enabled(l zapcore.Level) bool { return c.level.Enabled(l) && c.Core.Enabled(l) }

func (c levelCore) With(fields []zapcore.Field) zapcore.Core {
	return levelCore{Core: c.Core.With(fields), level: c.level}
}

func (c levelCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.level.Enabled(e.Level) {
		return ce
	}
	return c.Core.Check(e, ce)
}

// signalCore looks at etcd's warnings and errors for the facts in
// etcdSignals.
type signalCore struct {
	sig    *etcdSignals
	fields []zapcore.Field
}

func (c signalCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c signalCore) With(fields []zapcore.Field) zapcore.Core {
	return signalCore{sig: c.sig, fields: append(slices.Clip(c.fields), fields...)}
}

func (c signalCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c signalCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	switch {
	case e.Message == "server error" && fieldsMention(c.fields, fields, "permanently removed from the cluster"):
		// etcdserver's run loop, stopping the server.
		c.sig.removed.Store(true)
	case strings.HasPrefix(e.Message, "request sent was ignored") && strings.Contains(e.Message, "cluster ID mismatch"):
		c.sig.otherCluster.Store(true)
	}
	return nil
}

func (c signalCore) Sync() error { return nil }

// fieldsMention reports whether an error field in either list contains s.
func fieldsMention(a, b []zapcore.Field, s string) bool {
	for _, fields := range [][]zapcore.Field{a, b} {
		for _, f := range fields {
			if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType && strings.Contains(err.Error(), s) {
				return true
			}
		}
	}
	return false
}
