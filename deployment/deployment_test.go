package deployment

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBuildIDNamesTheCode(t *testing.T) {
	digestRead := 0
	digest := func() string { digestRead++; return "0123456789ab" }
	rev := "6d35a12df8f949042b68b18660803f3df2796fc9"

	assert.Equal(t, "6d35a12df8f9", buildIDFrom(rev, false, digest), "a clean checkout: its commit")
	assert.Zero(t, digestRead, "a clean build is not read")
	assert.Equal(t, "6d35a12df8f9+dirty-0123456789ab", buildIDFrom(rev, true, digest),
		"uncommitted changes: two such builds of one commit differ by their bytes")
	assert.Equal(t, "build-0123456789ab", buildIDFrom("", false, digest), "no stamp: the binary's digest")

	for _, id := range []string{buildIDFrom(rev, false, digest), buildIDFrom(rev, true, digest), buildIDFrom("", false, digest), DefaultBuildID()} {
		assert.NoError(t, CheckBuildID(id), id)
	}
}

// This test binary has no VCS stamp (go test never adds one): its id is
// its digest, the same at every call.
func TestDefaultBuildIDOfAnUnstampedBinary(t *testing.T) {
	id := DefaultBuildID()
	assert.Regexp(t, `^build-[0-9a-f]{12}$`, id)
	assert.Equal(t, id, DefaultBuildID())
	assert.NotEqual(t, "build-unknown", id)
}

func TestNameComesFromTheEnvironment(t *testing.T) {
	none := func(string) string { return "" }
	assert.Equal(t, DefaultName, Name(none))
	assert.Equal(t, "shop", Name(func(k string) string { return map[string]string{NameEnv: "shop"}[k] }))
}

func TestNamesTheServerCannotTakeAreRefused(t *testing.T) {
	for _, name := range []string{"", "pay.guard", "pay:guard", "__payguard", "-payguard", "pay guard", "payguard'", strings.Repeat("p", 65)} {
		assert.Error(t, CheckName(name), "%q", name)
	}
	for _, name := range []string{"payguard", "payments-0a1b2c3d4e", "shop_eu"} {
		assert.NoError(t, CheckName(name), name)
	}
	for _, id := range []string{"", "a:b", "__b", "+dirty", "v 1", "v1'", "v1/2", strings.Repeat("b", 129)} {
		assert.Error(t, CheckBuildID(id), "%q", id)
	}
	for _, id := range []string{"v1.2.3", "6d35a12df8f9+dirty-0123456789ab", "build-0123456789ab", "rollout_a"} {
		assert.NoError(t, CheckBuildID(id), id)
	}
	for _, p := range []string{SetCurrentAuto, SetCurrentAlways, SetCurrentNever} {
		assert.NoError(t, CheckSetCurrent(p))
	}
	assert.ErrorContains(t, CheckSetCurrent("sometimes"), "auto, always or never")
}
