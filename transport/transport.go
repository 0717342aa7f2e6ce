// Package transport holds how curator processes talk gRPC to each other:
// keepalives on both sides, and reconnects that never back off for long.
//
// A silent network (packets dropped, a peer frozen) does not close a TCP
// connection; without keepalives a stream on it waits for ever. gRPC's
// default reconnect backoff grows to two minutes, so a partition of a few
// seconds would cost a node its connection for minutes after it heals. The
// application's own deadlines (a heartbeat's answer) notice a dead stream
// within a second or two; these settings close the connection underneath
// within half a minute, and reconnect within a second of the network
// healing.
//
// Flow-control windows are fixed, on both sides. gRPC's default sizes
// them by measuring the link: each side answers data that arrives after a
// quiet spell with a window update and a PING, and the peer acks the PING.
// A node's heartbeat is exactly such data, every few seconds on every
// connection: without fixed windows each heartbeat and its answer cost
// four frames more, and the reads, writes and wake-ups they take, on the
// leader as on the node. Curator's messages are small; the fixed windows
// are large enough for its biggest answers (a fleet's node list) at LAN
// speed.
package transport

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// Keepalive settings. gRPC refuses client pings more often than every 10 s.
// They only clean up connections that are dead: the heartbeat's deadline
// is what moves a node off a dead manager, within seconds. A short ping
// timeout would do harm: a manager slow under load would see its nodes'
// connections cut, and every reconnect costs it a handshake.
const (
	ClientPingEvery = 10 * time.Second
	ServerPingEvery = 10 * time.Second
	PingTimeout     = 10 * time.Second
	// MaxReconnectDelay caps the wait between two attempts to connect.
	MaxReconnectDelay = time.Second
	// StreamWindow and ConnWindow are the fixed flow-control windows of a
	// stream and of a connection (gRPC's least is 64 KiB).
	StreamWindow = 1 << 20
	ConnWindow   = 4 << 20
)

// DialOptions are the options of every connection between curator
// processes (agents, followers forwarding, the CLI), with creds.
func DialOptions(creds credentials.TransportCredentials) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: ClientPingEvery, Timeout: PingTimeout, PermitWithoutStream: true}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: MaxReconnectDelay},
			MinConnectTimeout: 2 * time.Second,
		}),
		grpc.WithInitialWindowSize(StreamWindow),
		grpc.WithInitialConnWindowSize(ConnWindow),
	}
}

// ServerOptions are the keepalive and window options of the curator's
// gRPC server: it pings idle connections, drops one whose peer does not
// answer, lets clients ping as often as DialOptions does, and keeps its
// windows fixed.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InitialWindowSize(StreamWindow),
		grpc.InitialConnWindowSize(ConnWindow),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: ServerPingEvery, Timeout: PingTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: ClientPingEvery / 2, PermitWithoutStream: true}),
	}
}
