package payguard_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
)

// mdLink matches a markdown link or image target: ](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// docPages are the pages a reader of the repository sees: the README and
// everything under docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md"}
	require.NoError(t, filepath.WalkDir("docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	}))
	return pages
}

// The README and docs/ are read in a clone of this repository: every
// relative link must name a file in it, never one beside it, and a link to
// a heading (#anchor) must name a heading the page has.
func TestDocsLinkOnlyFilesInTheRepo(t *testing.T) {
	for _, page := range docPages(t) {
		raw, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(target, "#")
			path := page
			if target != "" {
				path = filepath.Join(filepath.Dir(page), target)
			}
			assert.False(t, strings.HasPrefix(filepath.Clean(path), ".."), "%s links outside the repo: %s", page, m[1])
			info, err := os.Stat(path)
			if !assert.NoError(t, err, "%s links to a missing file: %s", page, m[1]) {
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !info.IsDir() {
				assert.Contains(t, headingAnchors(t, path), anchor, "%s links to a heading %s does not have: %s", page, path, m[1])
			}
		}
	}
}

// headingAnchors are the anchors GitHub gives a page's headings: lower
// case, spaces to hyphens, punctuation dropped, repeats numbered.
func headingAnchors(t *testing.T, page string) []string {
	t.Helper()
	raw, err := os.ReadFile(page)
	require.NoError(t, err)
	var anchors []string
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors = append(anchors, a+"-"+strconv.Itoa(n))
		} else {
			anchors = append(anchors, a)
		}
		seen[a]++
	}
	return anchors
}

// docs/design.md is the contract scripts and users rely on: every name it
// has given stays in it (testdata/design-names.txt; add names, never drop).
func TestDesignKeepsItsNames(t *testing.T) {
	design, err := os.ReadFile("docs/design.md")
	require.NoError(t, err)
	f, err := os.Open("testdata/design-names.txt")
	require.NoError(t, err)
	defer f.Close()
	names := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" || strings.HasPrefix(name, "# ") || name == "#" {
			continue
		}
		names++
		assert.True(t, strings.Contains(string(design), name), "docs/design.md no longer names %s", name)
	}
	require.NoError(t, sc.Err())
	assert.Greater(t, names, 200, "the list of names was read")
}

// edge is one move between two statuses.
type edge struct{ from, to string }

// stateDrawing reads the one state diagram in docs/design.md: the edges
// drawn inside each composite state (orders, payments), by status name.
func stateDrawing(t *testing.T) map[string][]edge {
	t.Helper()
	var diagrams []string
	for _, page := range docPages(t) {
		raw, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, block := range strings.Split(string(raw), "```mermaid")[1:] {
			if body, _, _ := strings.Cut(block, "```"); strings.Contains(body, "stateDiagram") {
				require.Equal(t, "docs/design.md", page, "the state machine is drawn once, in docs/design.md")
				diagrams = append(diagrams, body)
			}
		}
	}
	require.Len(t, diagrams, 1, "docs/design.md draws the state machine once")

	alias := regexp.MustCompile(`^state "([A-Z_]+)" as (\w+)$`)
	open := regexp.MustCompile(`^state "[^"]*" as (\w+) \{$`)
	arrow := regexp.MustCompile(`^(\[\*\]|\w+) --> (\[\*\]|\w+)(: .+)?$`)
	names := map[string]string{}
	drawn := map[string][]edge{}
	machine := ""
	name := func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		return id
	}
	for _, line := range strings.Split(diagrams[0], "\n") {
		line = strings.TrimSpace(line)
		if m := open.FindStringSubmatch(line); m != nil {
			machine = m[1]
		} else if line == "}" {
			machine = ""
		} else if m := alias.FindStringSubmatch(line); m != nil {
			names[m[2]] = m[1]
		} else if m := arrow.FindStringSubmatch(line); m != nil && m[1] != "[*]" && m[2] != "[*]" {
			require.NotEmpty(t, machine, "an edge outside orders and payments: %s", line)
			drawn[machine] = append(drawn[machine], edge{name(m[1]), name(m[2])})
		}
	}
	return drawn
}

// The drawing in docs/design.md is the store's transition tables: every
// edge drawn is a move the database allows, and every move it allows is
// drawn.
func TestTheStateDrawingIsTheStoresTransitionTables(t *testing.T) {
	drawn := stateDrawing(t)
	testenv.NeedsServices(t, "PostgreSQL")
	s := testenv.Store(t)
	for machine, table := range map[string]string{"orders": "order_transitions", "payments": "payment_transitions"} {
		rows, err := s.Pool().Query(context.Background(), `SELECT from_status, to_status FROM `+table)
		require.NoError(t, err)
		var allowed []edge
		for rows.Next() {
			var e edge
			require.NoError(t, rows.Scan(&e.from, &e.to))
			allowed = append(allowed, e)
		}
		require.NoError(t, rows.Err())
		require.NotEmpty(t, allowed, table)
		for _, e := range drawn[machine] {
			assert.Contains(t, allowed, e, "docs/design.md draws %s → %s, which %s does not allow", e.from, e.to, table)
		}
		for _, e := range allowed {
			assert.True(t, slices.Contains(drawn[machine], e), "%s allows %s → %s, which docs/design.md does not draw", table, e.from, e.to)
		}
	}
}
