package pki

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/curatorproject/curator/internal/atomicfile"
)

const (
	pemCert     = "CERTIFICATE"
	pemKey      = "PRIVATE KEY"    // PKCS #8, what EncodeKey writes
	pemECKey    = "EC PRIVATE KEY" // SEC 1, accepted by DecodeKey
	certFileExt = ".crt"
	keyFileExt  = ".key"
)

// EncodeCert returns cert as a PEM block.
func EncodeCert(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: pemCert, Bytes: cert.Raw})
}

// DecodeCert parses the first PEM certificate in data.
func DecodeCert(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("decode certificate: no PEM CERTIFICATE block found")
		}
		if block.Type != pemCert {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("decode certificate: %w", err)
		}
		return cert, nil
	}
}

// EncodeKey returns key as a PKCS #8 PEM block.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemKey, Bytes: der}), nil
}

// DecodeKey parses the first PEM private key in data, PKCS #8 or SEC 1.
func DecodeKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("decode key: no PEM PRIVATE KEY block found")
		}
		switch block.Type {
		case pemKey:
			key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("decode key: %w", err)
			}
			signer, ok := key.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("decode key: %T cannot sign", key)
			}
			return signer, nil
		case pemECKey:
			key, err := x509.ParseECPrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("decode key: %w", err)
			}
			return key, nil
		}
	}
}

// CertPath and KeyPath are where WriteFiles puts the certificate and key
// named name in dir.
func CertPath(dir, name string) string { return filepath.Join(dir, name+certFileExt) }

// KeyPath: see CertPath.
func KeyPath(dir, name string) string { return filepath.Join(dir, name+keyFileExt) }

// WriteFiles writes cert to dir/name.crt (mode 0644) and, if key is not nil,
// key to dir/name.key (mode 0600), creating dir (mode 0700) if needed. Each
// file is written to a temporary file first and renamed, so a crash leaves
// either the old file or the new one.
func WriteFiles(dir, name string, cert *x509.Certificate, key crypto.Signer) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if key != nil {
		keyPEM, err := EncodeKey(key)
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		if err := atomicfile.Write(KeyPath(dir, name), keyPEM, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if err := atomicfile.Write(CertPath(dir, name), EncodeCert(cert), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// ReadFiles reads what WriteFiles wrote: dir/name.crt and dir/name.key.
func ReadFiles(dir, name string) (*x509.Certificate, crypto.Signer, error) {
	cert, err := ReadCert(CertPath(dir, name))
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(KeyPath(dir, name))
	if err != nil {
		return nil, nil, fmt.Errorf("read key: %w", err)
	}
	key, err := DecodeKey(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", KeyPath(dir, name), err)
	}
	return cert, key, nil
}

// ReadCert reads a PEM certificate file.
func ReadCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read certificate: %w", err)
	}
	cert, err := DecodeCert(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cert, nil
}

// WriteFiles writes the CA's certificate and key to dir/name.crt and
// dir/name.key.
func (ca *CA) WriteFiles(dir, name string) error {
	return WriteFiles(dir, name, ca.Cert, ca.Key)
}

// LoadCA reads a CA written by (*CA).WriteFiles and checks that its key
// matches its certificate.
func LoadCA(dir, name string) (*CA, error) {
	cert, key, err := ReadFiles(dir, name)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("load CA: %s is not a CA certificate", CertPath(dir, name))
	}
	if err := checkKeyPair(cert, key); err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

func checkKeyPair(cert *x509.Certificate, key crypto.Signer) error {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return fmt.Errorf("the key does not belong to the certificate of %q", cert.Subject.CommonName)
	}
	return nil
}
