package payguard_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mdLink matches a markdown link or image target: ](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// The README and docs/ are read in a clone of this repository: every
// relative link must name a file in it, never one beside it.
func TestDocsLinkOnlyFilesInTheRepo(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	pages = append(pages, "README.md")
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			path := filepath.Join(filepath.Dir(page), target)
			assert.False(t, strings.HasPrefix(filepath.Clean(path), ".."), "%s links outside the repo: %s", page, m[1])
			_, err := os.Stat(path)
			assert.NoError(t, err, "%s links to a missing file: %s", page, m[1])
		}
	}
}
