package redisproc

import (
	"context"
	"strconv"
)

// TLSFiles are the PEM files a TLS server of StartTLS uses.
type TLSFiles struct {
	Cert, Key, CA string
}

// StartTLS is Start for servers that also serve TLS, on TLSPort, with
// files; clients are not asked for certificates. The plain Port stays, for
// PING while starting and for the tests' own commands.
func StartTLS(ctx context.Context, n int, files TLSFiles) ([]*Server, error) {
	return startServers(ctx, n, &files)
}

// tlsArgs are a TLS server's extra flags; s.mu is held.
func (s *Server) tlsArgs() []string {
	if s.tls == nil {
		return nil
	}
	return []string{
		"--tls-port", strconv.Itoa(s.TLSPort),
		"--tls-cert-file", s.tls.Cert,
		"--tls-key-file", s.tls.Key,
		"--tls-ca-cert-file", s.tls.CA,
		"--tls-auth-clients", "no",
	}
}
