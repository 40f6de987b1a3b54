package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
)

// A create carrying an Idempotency-Key is "replayable" to
// net/http. On a reused keep-alive connection that the gateway reads in full
// and then drops without answering (it crashed mid-request), the transport
// re-sends it by itself on a fresh connection; if that dial fails (the
// gateway is now down), do() sees connected=false and calls the create
// UNREACHABLE — "never reached" — although the first write reached the
// gateway, which took the request.
func TestACreateTheGatewayReadIsNeverUnreachable(t *testing.T) {
	for _, key := range []string{"", "payguard-order-o1"} {
		t.Run("key="+key, func(t *testing.T) { writtenThenDropped(t, key) })
	}
}

func writtenThenDropped(t *testing.T, key string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var creates atomic.Int32
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		br := bufio.NewReader(conn)
		ok := `{"meta":{"result":"SUCCESS"},"data":{"transactionKey":"tx-1","status":"PENDING"}}`
		for n := 1; ; n++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if req.Method == http.MethodPost {
				creates.Add(1)
			}
			if n == 1 {
				// a first call answered: the connection stays alive
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+
					strconv.Itoa(len(ok))+"\r\n\r\n"+ok)
				continue
			}
			// The second create is read in full (the gateway took it),
			// then the gateway dies: it stops listening and drops the
			// connection without an answer.
			_ = ln.Close()
			_ = conn.Close()
			return
		}
	}()
	c := client(t, "http://"+ln.Addr().String())
	ctx := context.Background()
	// a lookup first, to leave a kept-alive connection behind
	_, _ = c.PaymentsByOrder(ctx, "order-warm")

	_, err = c.CreatePayment(ctx, order, "u1", key)
	t.Logf("creates the gateway read: %d; error: %v", creates.Load(), err)
	require.Equal(t, int32(1), creates.Load(), "the gateway read the create")
	require.False(t, errors.Is(err, gateway.ErrUnreachable),
		"a create the gateway read is classified UNREACHABLE (never reached): %v", err)
}
