package harness

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is a throwaway certificate authority for one cluster: it signs the
// API server's serving certificate and the client certificates of the
// administrator, the controller manager and the kubelet. Everything lives
// in dir and expires in a day.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
}

// certIdentity describes a certificate to issue.
type certIdentity struct {
	// file is the base name of the .crt and .key files.
	file string
	// commonName and organizations are the user and groups of a client
	// certificate.
	commonName    string
	organizations []string
	// dnsNames and ips make it a serving certificate.
	dnsNames []string
	ips      []net.IP
}

// newPKI creates the CA in dir (ca.crt, ca.key).
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create PKI directory: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "nri-cpumanager-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, caCert: cert, caKey: key}
	if err := writePEM(p.caCertPath(), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writeKey(filepath.Join(dir, "ca.key"), key); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) caCertPath() string { return filepath.Join(p.dir, "ca.crt") }

// issue signs a certificate for id and returns the paths of its
// certificate and key.
func (p *pki) issue(id certIdentity) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate key for %s: %w", id.file, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: id.commonName, Organization: id.organizations},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     id.dnsNames,
		IPAddresses:  id.ips,
	}
	if len(id.dnsNames) > 0 || len(id.ips) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return "", "", fmt.Errorf("sign certificate for %s: %w", id.file, err)
	}
	certPath, keyPath = filepath.Join(p.dir, id.file+".crt"), filepath.Join(p.dir, id.file+".key")
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	if err := writeKey(keyPath, key); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// serviceAccountKey writes the key pair the API server signs service
// account tokens with (sa.key, sa.pub) and returns their paths.
func (p *pki) serviceAccountKey() (private, public string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate service account key: %w", err)
	}
	private, public = filepath.Join(p.dir, "sa.key"), filepath.Join(p.dir, "sa.pub")
	if err := writeKey(private, key); err != nil {
		return "", "", err
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", fmt.Errorf("encode service account public key: %w", err)
	}
	if err := writePEM(public, "PUBLIC KEY", der); err != nil {
		return "", "", err
	}
	return private, public, nil
}

// serial returns a random certificate serial number.
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // never fails
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode key %s: %w", path, err)
	}
	return writePEM(path, "PRIVATE KEY", der)
}

func writePEM(path, blockType string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
