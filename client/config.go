package client

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/curatorproject/curator/internal/atomicfile"
	"github.com/curatorproject/curator/pki"
)

// EnvConfig names the environment variable that overrides the default client
// config path.
const EnvConfig = "CURATOR_CONFIG"

// Names of the files WriteAdminConfig writes.
const (
	ConfigFileName = "config.yaml"
	caName         = "ca"
	adminName      = "admin"
)

// Config is an operator's client config: which cluster, where its managers
// were when the file was written, and the admin credential. It is what
// `curator agent init` writes to DIR/admin/config.yaml and `curator dev` to
// DIR/config.yaml.
type Config struct {
	ClusterID string `json:"cluster_id"`
	// Managers are gRPC addresses (IP:PORT) of managers known when the
	// file was written. The client also keeps a cache of the current ones
	// beside the file (see CachePath).
	Managers []string `json:"managers"`
	// CA, Cert and Key are PEM files: the cluster CA, the admin certificate
	// and its key. Relative paths are taken from the config file's folder.
	CA   string `json:"ca"`
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// DefaultConfigPath is $CURATOR_CONFIG if set, else
// ~/.config/curator/config.yaml.
func DefaultConfigPath() string {
	if p := os.Getenv(EnvConfig); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		// No home: a relative path still gives a clear "no client
		// config at .config/curator/config.yaml" later.
		home = ""
	}
	return filepath.Join(home, ".config", "curator", ConfigFileName)
}

// LoadConfig reads and validates the config file at path. Unknown fields are
// an error, so a misspelt key is not silently ignored.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no client config at %s: run `curator agent init` or pass --config", path)
	}
	if err != nil {
		return nil, fmt.Errorf("read client config: %w", err)
	}
	var cfg Config
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("client config %s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("client config %s: %w", path, err)
	}
	return &cfg, nil
}

// Validate checks that every field a client needs is set.
func (c *Config) Validate() error {
	var missing []string
	if len(c.Managers) == 0 {
		missing = append(missing, "managers")
	}
	for _, f := range []struct{ name, value string }{{"ca", c.CA}, {"cert", c.Cert}, {"key", c.Key}} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %q", missing)
	}
	for _, m := range c.Managers {
		if m == "" {
			return errors.New("managers: empty address")
		}
	}
	return nil
}

// Save writes c to path as YAML, mode 0600, through a temporary file and a
// rename so that a reader never sees half a file. It creates path's folder
// (mode 0700) if needed.
func (c *Config) Save(path string) error {
	data, err := c.marshal()
	if err != nil {
		return fmt.Errorf("save client config: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save client config: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("save client config: %w", err)
	}
	return nil
}

// marshal returns c as YAML with its keys in the order of the struct, which
// reads better than the sorted order sigs.k8s.io/yaml would give: each key is
// marshalled on its own (so quoting stays the library's business) and the
// pieces are joined.
func (c *Config) marshal() ([]byte, error) {
	var out []byte
	for _, kv := range []struct {
		key   string
		value any
	}{
		{"cluster_id", c.ClusterID},
		{"managers", c.Managers},
		{"ca", c.CA},
		{"cert", c.Cert},
		{"key", c.Key},
	} {
		b, err := yaml.Marshal(map[string]any{kv.key: kv.value})
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// WriteAdminConfig writes an admin credential and a config that uses it into
// dir: ca.crt, admin.crt, admin.key (mode 0600) and config.yaml, with paths
// relative to dir so the folder can be moved or copied as a whole. It returns
// the config's path.
func WriteAdminConfig(dir, clusterID string, managers []string, ca, cert *x509.Certificate, key crypto.Signer) (string, error) {
	if ca == nil || cert == nil || key == nil {
		return "", errors.New("write admin config: CA, certificate and key are all needed")
	}
	if err := pki.WriteFiles(dir, caName, ca, nil); err != nil {
		return "", fmt.Errorf("write admin config: %w", err)
	}
	if err := pki.WriteFiles(dir, adminName, cert, key); err != nil {
		return "", fmt.Errorf("write admin config: %w", err)
	}
	cfg := &Config{
		ClusterID: clusterID,
		Managers:  append([]string(nil), managers...),
		CA:        filepath.Base(pki.CertPath(dir, caName)),
		Cert:      filepath.Base(pki.CertPath(dir, adminName)),
		Key:       filepath.Base(pki.KeyPath(dir, adminName)),
	}
	if err := cfg.Validate(); err != nil {
		return "", fmt.Errorf("write admin config: %w", err)
	}
	path := filepath.Join(dir, ConfigFileName)
	if err := cfg.Save(path); err != nil {
		return "", fmt.Errorf("write admin config: %w", err)
	}
	return path, nil
}

// tlsConfig reads the CA, certificate and key named by c, relative to the
// folder of the config file at configPath, and returns the mutual TLS
// configuration of a management client.
func (c *Config) tlsConfig(configPath string) (*tls.Config, error) {
	cred, err := c.credential(configPath)
	if err != nil {
		return nil, err
	}
	return pki.ClientTLS(pki.TLSCertificate(cred.cert, cred.key), cred.ca), nil
}

// adminCredential is what a config's files hold.
type adminCredential struct {
	ca, cert *x509.Certificate
	key      crypto.Signer
	// certPath is the certificate's file.
	certPath string
}

// ClusterCA reads the cluster CA certificate c names, relative to the
// folder of the config file at configPath.
func (c *Config) ClusterCA(configPath string) (*x509.Certificate, error) {
	ca, err := pki.ReadCert(resolveBeside(configPath, c.CA))
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	return ca, nil
}

// resolveBeside is p, relative to the folder of the config file at
// configPath unless it is absolute.
func resolveBeside(configPath, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(configPath), p)
}

// credential reads the CA, certificate and key named by c, relative to
// the folder of the config file at configPath.
func (c *Config) credential(configPath string) (adminCredential, error) {
	resolve := func(p string) string { return resolveBeside(configPath, p) }
	ca, err := c.ClusterCA(configPath)
	if err != nil {
		return adminCredential{}, err
	}
	cert, err := pki.ReadCert(resolve(c.Cert))
	if err != nil {
		return adminCredential{}, fmt.Errorf("admin certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(resolve(c.Key))
	if err != nil {
		return adminCredential{}, fmt.Errorf("admin key: %w", err)
	}
	key, err := pki.DecodeKey(keyPEM)
	if err != nil {
		return adminCredential{}, fmt.Errorf("admin key %s: %w", resolve(c.Key), err)
	}
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return adminCredential{}, fmt.Errorf("admin key %s does not match certificate %s", resolve(c.Key), resolve(c.Cert))
	}
	return adminCredential{ca: ca, cert: cert, key: key, certPath: resolve(c.Cert)}, nil
}
