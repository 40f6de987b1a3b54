package runner

import (
	"testing"

	"github.com/payguard/payguard/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
