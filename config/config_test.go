package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/gateway"
)

func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8081": true, "127.9.9.9:1": true, "[::1]:8081": true, "localhost:8081": true, "LOCALHOST:0": true,
		"0.0.0.0:8081": false, ":8081": false, "[::]:8081": false, "10.0.0.1:8081": false, "worker:8081": false,
		"[::ffff:127.0.0.1]:8081": true, "127.0.0.1": false, "": false,
	} {
		assert.Equal(t, want, config.LoopbackOnly(addr), "%q", addr)
	}
}

func TestThePublicSecretOnlyOnLoopback(t *testing.T) {
	dev := config.Common{GatewaySecret: gateway.DevSecret}
	assert.NoError(t, dev.CheckSecretFor("127.0.0.1:8081"))
	if err := dev.CheckSecretFor("0.0.0.0:8081"); assert.Error(t, err) {
		assert.Contains(t, err.Error(), "GATEWAY_SECRET")
		assert.Contains(t, err.Error(), "0.0.0.0:8081")
	}
	own := config.Common{GatewaySecret: "a-secret-of-its-own"}
	assert.NoError(t, own.CheckSecretFor("0.0.0.0:8081"))
	assert.Equal(t, gateway.DevSecret, config.GatewaySecret(func(string) string { return "" }), "unset: the development secret")
	assert.Equal(t, "s", config.GatewaySecret(func(k string) string { return map[string]string{"GATEWAY_SECRET": "s"}[k] }))
}
