package pki

import (
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// SessionTickets are the keys a server encrypts its TLS 1.3 session
// tickets with. Servers that derive them from the same secret (the
// cluster's managers, from the CA's key) decrypt each other's tickets, so a
// client whose server went away resumes its session with another instead
// of a full handshake (a signature and two chains verified on each side);
// transport.SharedSessions is the client's half. Until a secret is set,
// the tickets are crypto/tls's own (one server's).
//
// A key is derived per UTC day; a server encrypts with today's and
// decrypts with the last TicketDays days' (crypto/tls's own limit on a
// ticket's age is seven days), so a ticket handed out when a node
// connected days ago still resumes.
type SessionTickets struct {
	// keys holds the keys in a tls.Config, used for nothing else: its
	// EncryptTicket and DecryptTicket do the work.
	keys atomic.Pointer[tls.Config]
}

// TicketDays is how many days of keys a server decrypts with.
const TicketDays = 8

// NewSessionTickets returns tickets of crypto/tls's own keys until
// SetSecret.
func NewSessionTickets() *SessionTickets {
	t := &SessionTickets{}
	t.keys.Store(&tls.Config{})
	return t
}

// SetSecret derives the keys of now's day and the TicketDays-1 before it
// from secret. Call it again each day (Serve's callers do it hourly).
func (t *SessionTickets) SetSecret(secret []byte, now time.Time) error {
	keys, err := TicketKeys(secret, now)
	if err != nil {
		return err
	}
	cfg := &tls.Config{}
	cfg.SetSessionTicketKeys(keys)
	t.keys.Store(cfg)
	return nil
}

// TicketKeys are the keys of now's UTC day and the TicketDays-1 before
// it, newest first, derived from secret (HKDF-SHA256).
func TicketKeys(secret []byte, now time.Time) ([][32]byte, error) {
	if len(secret) == 0 {
		return nil, fmt.Errorf("session ticket keys: no secret")
	}
	day := now.UTC().Unix() / 86400
	keys := make([][32]byte, TicketDays)
	for i := range keys {
		k, err := hkdf.Key(sha256.New, secret, nil, "curator session tickets, day "+strconv.FormatInt(day-int64(i), 10), 32)
		if err != nil {
			return nil, fmt.Errorf("session ticket keys: %w", err)
		}
		copy(keys[i][:], k)
	}
	return keys, nil
}

// Serve makes cfg, a server's configuration, encrypt and decrypt its
// session tickets with t's keys, current at each handshake.
func (t *SessionTickets) Serve(cfg *tls.Config) {
	cfg.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		return t.keys.Load().EncryptTicket(cs, ss)
	}
	cfg.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		return t.keys.Load().DecryptTicket(identity, cs)
	}
}
