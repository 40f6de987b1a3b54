package e2e_test

import (
	"os"
	"testing"

	"github.com/payguard/payguard/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopTemporal()
	os.Exit(code)
}
