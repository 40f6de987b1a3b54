package config_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/config"
)

func TestHTTPTimeoutsAreNeverUnlimited(t *testing.T) {
	d := config.DefaultHTTPTimeouts()
	assert.Equal(t, config.HTTPTimeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second, Idle: time.Minute}, d)
	srv := config.HTTPTimeouts{}.Server(http.NotFoundHandler())
	assert.Equal(t, []time.Duration{d.ReadHeader, d.Read, d.Write, d.Idle},
		[]time.Duration{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout}, "zero takes the defaults")
	srv = config.HTTPTimeouts{Read: time.Second, Idle: -1}.Server(http.NotFoundHandler())
	assert.Equal(t, time.Second, srv.ReadTimeout, "a value set is kept")
	assert.Equal(t, d.Idle, srv.IdleTimeout, "a negative one takes the default")
	assert.Equal(t, d.Write, srv.WriteTimeout)
}
