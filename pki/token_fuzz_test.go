package pki

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// FuzzParseToken: a token that parses is in its one canonical form and
// parses back to itself, however it was written (case, surrounding
// space); anything else is ErrMalformedToken with a message that does not
// echo the input, which may be a near-miss of a real secret.
func FuzzParseToken(f *testing.F) {
	fp := strings.Repeat("ab", 32)
	secret := strings.Repeat("a", 51) + "q"
	for _, s := range []string{
		"CUR1-" + fp + "-" + secret,
		"  CUR1-" + strings.ToUpper(fp) + "-" + strings.ToUpper(secret) + "\n",
		"CUR1-" + fp + "-" + secret + "-",
		"CUR1-" + fp[:63] + "-" + secret,
		"CUR1-" + fp + "-" + secret[:51],
		"CUR1-" + fp + "-" + secret + "=",
		"CUR2-" + fp + "-" + secret,
		"cur1-" + fp + "-" + secret,
		"CUR1--",
		"",
		"-",
		"CUR1-\u00e9-\u00e9",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			if !errors.Is(err, ErrMalformedToken) {
				t.Fatalf("ParseToken(%q) = %v, not ErrMalformedToken", s, err)
			}
			if in := strings.TrimSpace(s); len(in) >= 8 && strings.Contains(err.Error(), in) {
				t.Fatalf("ParseToken(%q): the error echoes the input: %v", s, err)
			}
			return
		}
		if raw, err := hex.DecodeString(tok.CAFingerprint); err != nil || len(raw) != 32 || tok.CAFingerprint != strings.ToLower(tok.CAFingerprint) {
			t.Fatalf("ParseToken(%q): fingerprint %q is not 64 lowercase hex digits", s, tok.CAFingerprint)
		}
		if raw, err := nodeIDEncoding.DecodeString(tok.Secret); err != nil || len(raw) != tokenSecretBytes || len(tok.Secret) != 52 {
			t.Fatalf("ParseToken(%q): secret %q is not %d bytes in 52 base32 characters", s, tok.Secret, tokenSecretBytes)
		}
		canonical := tok.String()
		if want := "CUR1-" + strings.ToLower(strings.TrimSpace(s)[5:]); canonical != want {
			t.Fatalf("ParseToken(%q).String() = %q, want %q", s, canonical, want)
		}
		for _, again := range []string{canonical, " " + canonical + "\t", "CUR1-" + strings.ToUpper(canonical[5:])} {
			back, err := ParseToken(again)
			if err != nil || back != tok {
				t.Fatalf("ParseToken(%q) = %+v, %v; want %+v as from %q", again, back, err, tok, s)
			}
		}
	})
}
