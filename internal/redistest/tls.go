package redistest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
)

// StartTLS is Start for servers that also serve TLS on their TLSPort, with
// a certificate for 127.0.0.1 made for this test; the returned config
// trusts it (a client's TLSConfig).
func StartTLS(t testing.TB, n int) ([]*Server, *tls.Config) {
	t.Helper()
	files, pool := selfSigned(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	procs, err := redisproc.StartTLS(ctx, n, files)
	if err != nil {
		t.Fatalf("redistest: starting %d TLS servers: %v", n, err)
	}
	t.Cleanup(func() { redisproc.StopAll(procs) })
	servers := make([]*Server, n)
	for i, p := range procs {
		servers[i] = &Server{p}
	}
	return servers, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// SelfSigned makes a self-signed certificate for host, an IP address or a
// DNS name, valid for a day around now, and a pool that trusts it: what a
// test's TLS server presents and its client trusts.
func SelfSigned(t testing.TB, host string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: host},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key to
// t's temporary directory, for redis-server's TLS port.
func selfSigned(t testing.TB) (redisproc.TLSFiles, *x509.CertPool) {
	t.Helper()
	cert, pool := SelfSigned(t, "127.0.0.1")
	kder, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := redisproc.TLSFiles{
		Cert: filepath.Join(dir, "cert.pem"),
		Key:  filepath.Join(dir, "key.pem"),
		CA:   filepath.Join(dir, "cert.pem"),
	}
	if err := os.WriteFile(files.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files.Key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return files, pool
}
