package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/payguard/payguard/config"
)

// FastHTTPTimeouts are server timeouts short enough for a test to watch
// them fire.
func FastHTTPTimeouts() config.HTTPTimeouts {
	return config.HTTPTimeouts{ReadHeader: 300 * time.Millisecond, Read: 300 * time.Millisecond,
		Write: 300 * time.Millisecond, Idle: 300 * time.Millisecond}
}

// slowConn dials the host of rawURL on a real TCP socket, with every read
// and write bounded by within, and returns it with the URL's path.
func slowConn(t testing.TB, rawURL string, within time.Duration) (net.Conn, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, within)
	if err != nil {
		t.Fatalf("dial %s: %v", u.Host, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(within)); err != nil {
		t.Fatal(err)
	}
	return conn, u.RequestURI()
}

// serverEnded fails the test when err, from a read or write of a slow
// client, is the client's own deadline passing: any other error (EOF, a
// reset) or an answer is the server ending the exchange in time.
func serverEnded(t testing.TB, err error, what string, within time.Duration) {
	t.Helper()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: the server still held the connection after %s", what, within)
	}
}

// TrickleBody sends method rawURL announcing a 4 KiB body, then writes it
// one byte every tick, so it would take minutes to finish, and returns how
// long the server took to answer or close the connection. It fails the test
// when the server still holds the connection after within: a server without
// a read timeout waits for such a client for ever.
func TrickleBody(t testing.TB, method, rawURL string, tick, within time.Duration) time.Duration {
	t.Helper()
	conn, path := slowConn(t, rawURL, within)
	start := time.Now()
	_, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-USER-ID: trickle\r\nContent-Length: 4096\r\n\r\n{",
		method, path, conn.RemoteAddr())
	if err != nil {
		t.Fatalf("send headers: %v", err)
	}
	answered := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 1)) // the answer's first byte, or the close
		answered <- err
	}()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case err := <-answered:
			serverEnded(t, err, "trickled body", within)
			return time.Since(start)
		case <-ticker.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				serverEnded(t, err, "trickled body", within)
				return time.Since(start)
			}
		}
	}
}

// IdleAfterOneRequest sends one complete GET of rawURL, reads the answer,
// then leaves the kept-alive connection idle and returns how long the server
// took to close it. It fails the test when the connection is still open
// after within: a server without an idle timeout keeps it for ever.
func IdleAfterOneRequest(t testing.TB, rawURL string, within time.Duration) time.Duration {
	t.Helper()
	conn, path := slowConn(t, rawURL, within)
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, conn.RemoteAddr()); err != nil {
		t.Fatalf("send request: %v", err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("read answer body: %v", err)
	}
	resp.Body.Close()
	if resp.Close {
		t.Fatalf("the server closed after the answer (HTTP %d): nothing left to idle", resp.StatusCode)
	}
	start := time.Now()
	_, err = r.ReadByte()
	if err == nil {
		t.Fatal("the server sent bytes nobody asked for")
	}
	serverEnded(t, err, "idle connection", within)
	return time.Since(start)
}
