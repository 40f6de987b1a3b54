package service_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
)

// A secured Temporal cluster, as Temporal Cloud or a self-hosted one with
// mTLS: the dev server behind an in-test TLS-terminating proxy that
// demands a client certificate signed by the test's CA. The certificates
// are made here; nothing is checked in.

type testPKI struct {
	dir                           string
	caPool                        *x509.CertPool
	serverCert                    tls.Certificate
	caPath, certPath, keyPath     string
	strangerCert, strangerKeyPath string
}

func newPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "payguard test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	p := testPKI{dir: dir, caPool: x509.NewCertPool()}
	p.caPool.AddCert(ca)
	p.caPath = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)

	issue := func(name string, serial int64, usage x509.ExtKeyUsage, signer *x509.Certificate, signerKey *ecdsa.PrivateKey) (certPath, keyPath string, cert tls.Certificate) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature, DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		if signer == nil {
			signer, signerKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		certPath = writePEM(t, dir, name+".pem", "CERTIFICATE", der)
		keyPath = writePEM(t, dir, name+"-key.pem", "EC PRIVATE KEY", keyDER)
		cert, err = tls.LoadX509KeyPair(certPath, keyPath)
		require.NoError(t, err)
		return certPath, keyPath, cert
	}
	_, _, p.serverCert = issue("server", 2, x509.ExtKeyUsageServerAuth, ca, caKey)
	p.certPath, p.keyPath, _ = issue("worker", 3, x509.ExtKeyUsageClientAuth, ca, caKey)
	p.strangerCert, p.strangerKeyPath, _ = issue("stranger", 4, x509.ExtKeyUsageClientAuth, nil, nil) // self-signed: not the CA's
	return p
}

func writePEM(t *testing.T, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
	return path
}

// mtlsProxy terminates mTLS (gRPC's h2 by ALPN) and forwards the bytes to
// the dev server's plain port; it counts the connections whose client
// certificate verified.
func mtlsProxy(t *testing.T, p testPKI, upstream string) (addr string, verified *atomic.Int64) {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{p.serverCert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.caPool, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	verified = &atomic.Int64{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				if tc.HandshakeContext(context.Background()) != nil {
					return
				}
				verified.Add(1)
				up, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, tc); _ = up.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(tc, up)
			}()
		}
	}()
	return l.Addr().String(), verified
}

// The worker and the starter take the secured cluster's address and TLS
// client settings from a profile of Temporal's standard config file
// (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE), as the SDK's envconfig reads
// it; an order goes all the way through the TLS connection.
func TestWorkerConnectsWithTLSFromAConfigProfile(t *testing.T) {
	t.Parallel()
	pki := newPKI(t)
	proxy, verified := mtlsProxy(t, pki, testenv.TemporalAddress(t))
	toml := fmt.Sprintf(`[profile.default]
address = "127.0.0.1:1"

[profile.secure]
address = %q
namespace = "default"
[profile.secure.tls]
client_cert_path = %q
client_key_path = %q
server_ca_cert_path = %q
server_name = "localhost"

[profile.stranger]
address = %q
[profile.stranger.tls]
client_cert_path = %q
client_key_path = %q
server_ca_cert_path = %q
`, proxy, pki.certPath, pki.keyPath, pki.caPath, proxy, pki.strangerCert, pki.strangerKeyPath, pki.caPath)
	configFile := filepath.Join(pki.dir, "temporal.toml")
	require.NoError(t, os.WriteFile(configFile, []byte(toml), 0o600))

	sim := testenv.Pgsim(t, testenv.Processing(100*time.Millisecond))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	taskQueue := testenv.ID("tls")
	env := map[string]string{
		"TEMPORAL_CONFIG_FILE": configFile, "TEMPORAL_PROFILE": "secure",
		"TASK_QUEUE": taskQueue, deployment.NameEnv: taskQueue, "DATABASE_URL": testenv.NewDatabase(t), "GATEWAY_URL": sim.GatewayURL(),
		"GATEWAY_SECRET": testenv.Secret, "CALLBACK_URL": "http://" + l.Addr().String() + "/callbacks/gateway",
		codec.KeysEnv: testenv.CodecKeys(),
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := service.ParseFlags([]string{"--http-addr", l.Addr().String()}, getenv, io.Discard)
	require.NoError(t, err)
	cfg.Listener = l
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := service.Start(ctx, cfg, testenv.Logger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Stop() })
	assert.Positive(t, verified.Load(), "the worker connected through the proxy with the CA's client certificate")

	st, err := store.Open(ctx, env["DATABASE_URL"])
	require.NoError(t, err)
	defer st.Close()
	_, err = st.SetStock(ctx, "P1", 5)
	require.NoError(t, err)
	before := verified.Load()
	// The starter, with the same environment: the profile, no address.
	err = cli.Run(ctx, []string{"order", "--product", "P1", "--amount", "5000", "--order-id", "tls-order-1", "--wait"},
		cli.Env{Getenv: getenv, Stdout: io.Discard, Stderr: io.Discard})
	require.NoError(t, err)
	o, err := st.GetOrder(ctx, "tls-order-1")
	require.NoError(t, err)
	assert.Equal(t, status.OrderConfirmed, o.Status, "%+v", o)
	assert.Greater(t, verified.Load(), before, "the starter came through the proxy too")

	// A certificate the cluster's CA did not sign gets nowhere, with an error.
	env["TEMPORAL_PROFILE"] = "stranger"
	bad, err := service.ParseFlags([]string{"--http-addr", "127.0.0.1:0"}, getenv, io.Discard)
	require.NoError(t, err)
	opts, err := bad.ClientOptions(testenv.Logger(t))
	require.NoError(t, err)
	assert.Equal(t, proxy, opts.HostPort)
	require.NotNil(t, opts.ConnectionOptions.TLS)
	assert.Len(t, opts.ConnectionOptions.TLS.Certificates, 1)
	dialCtx, cancelDial := context.WithTimeout(ctx, 5*time.Second)
	defer cancelDial()
	_, err = client.DialContext(dialCtx, opts)
	assert.Error(t, err, "the proxy refuses a client certificate its CA did not sign")
}
