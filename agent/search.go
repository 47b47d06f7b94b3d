package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/wrenchworks/wrench/sandbox"
)

// The search tool is a code search that needs no embedding model: the query's words and identifiers (split at camelCase
// and snake_case) are looked up across the workspace in one grep, and files
// are ranked by the distinct terms they contain, rarer terms weighing more
// (an idf weight), with a bonus for terms in the path. It is optional
// (Config.CodeSearch, or an allowlist naming it).

const (
	searchMaxTerms   = 12
	searchMaxMatches = 5000
	searchTopFiles   = 10
	searchLinesShown = 3
)

var searchTool = &toolDef{
	name: ToolSearch,
	desc: "Find the code most related to a description when you do not know the exact names: the query's words and identifiers are looked up across the workspace and files are ranked by how many distinct terms they contain (rarer terms count more), each with its best matching lines. Use grep for an exact pattern.",
	params: `{"type":"object","properties":{` +
		`"query":{"type":"string","description":"what you are looking for, in words and likely identifiers, e.g. \"token expiry check in the auth middleware\""},` +
		`"include":{"type":"string","description":"glob on file names, e.g. *.go"}},` +
		`"required":["query"]}`,
	required: []string{"query"},
	readOnly: true,
	optional: true,
	bind:     func(k *toolKit) tool { return &search{search: k.env, maxOutput: k.cfg.MaxOutputChars} },
}

// search ranks files by the query's terms they contain.
type search struct {
	search    sandbox.Searcher
	maxOutput int
}

var (
	searchWord  = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	searchCamel = regexp.MustCompile(`[A-Z]+[a-z0-9]*|[a-z0-9]+`)
	stopWords   = map[string]bool{
		"the": true, "and": true, "for": true, "with": true, "that": true, "this": true, "from": true,
		"into": true, "when": true, "where": true, "what": true, "which": true, "how": true, "does": true,
		"not": true, "are": true, "was": true, "were": true, "has": true, "have": true, "its": true,
		"code": true, "file": true, "files": true, "function": true, "find": true, "all": true, "any": true,
	}
)

// searchTerms extracts the lower-case terms of a query: each word, and the
// parts of a compound identifier, stemmed, three letters or more, no stop
// words.
func searchTerms(query string) []string {
	var out []string
	add := func(t string) {
		t = stem(strings.ToLower(t))
		if len(t) >= 3 && !stopWords[t] && !slices.Contains(out, t) && len(out) < searchMaxTerms {
			out = append(out, t)
		}
	}
	for _, w := range searchWord.FindAllString(query, -1) {
		add(w)
		for _, part := range strings.Split(w, "_") {
			for _, p := range searchCamel.FindAllString(part, -1) {
				add(p)
			}
		}
	}
	return out
}

// stem drops a common English inflection, so that "rejected" also finds
// "rejects" (terms match as substrings).
func stem(t string) string {
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if base, ok := strings.CutSuffix(t, suf); ok && len(base) >= 4 && !strings.HasSuffix(base, "s") {
			return base
		}
	}
	return t
}

// searchHit is one file's evidence.
type searchHit struct {
	path  string
	terms map[string]bool
	lines []sandbox.GrepMatch
	score float64
}

func (t *search) run(ctx context.Context, _ ToolCall, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Query   string `json:"query"`
		Include string `json:"include"`
	}](ToolSearch, raw)
	if bad != nil {
		return *bad
	}
	terms := searchTerms(a.Query)
	if len(terms) == 0 {
		return errorResult("the query has no searchable words (three letters or more); describe what you look for.")
	}
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = regexp.QuoteMeta(t)
	}
	matches, err := t.search.Grep(ctx, sandbox.GrepRequest{Pattern: "(?i)(" + strings.Join(quoted, "|") + ")", Include: a.Include, MaxMatches: searchMaxMatches})
	if err != nil {
		return envFailure(ctx, "search", err)
	}
	hits := rankSearch(terms, matches)
	if len(hits) == 0 {
		return toolResult{output: fmt.Sprintf("Nothing matches any of: %s.", strings.Join(terms, ", "))}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Files ranked by the terms they contain (%s):\n", strings.Join(terms, ", "))
	for i, h := range hits[:min(len(hits), searchTopFiles)] {
		fmt.Fprintf(&b, "\n%d. %s (%s)\n", i+1, h.path, strings.Join(slices.Sorted(maps.Keys(h.terms)), ", "))
		for _, m := range h.lines {
			text := strings.TrimSpace(m.Text)
			if len(text) > 200 {
				text = text[:200] + "…"
			}
			fmt.Fprintf(&b, "   %d: %s\n", m.Line, text)
		}
	}
	if len(hits) > searchTopFiles {
		fmt.Fprintf(&b, "\n[%d more files match fewer terms]\n", len(hits)-searchTopFiles)
	}
	return toolResult{
		output:  capOutput(strings.TrimRight(b.String(), "\n"), t.maxOutput, 0),
		display: fmt.Sprintf("search %q: %d files", a.Query, len(hits)),
	}
}

// rankSearch scores files: the idf of each distinct term found in the file
// or its path, plus a little for the number of matching lines. Each file
// keeps its lines with the most distinct terms.
func rankSearch(terms []string, matches []sandbox.GrepMatch) []searchHit {
	byPath := map[string]*searchHit{}
	var order []*searchHit
	lineTerms := func(text string) map[string]bool {
		low := strings.ToLower(text)
		found := map[string]bool{}
		for _, t := range terms {
			if strings.Contains(low, t) {
				found[t] = true
			}
		}
		return found
	}
	for _, m := range matches {
		h := byPath[m.Path]
		if h == nil {
			h = &searchHit{path: m.Path, terms: lineTerms(m.Path)}
			byPath[m.Path] = h
			order = append(order, h)
		}
		for t := range lineTerms(m.Text) {
			h.terms[t] = true
		}
		h.lines = append(h.lines, m)
	}
	df := map[string]int{}
	for _, h := range order {
		for t := range h.terms {
			df[t]++
		}
	}
	n := float64(len(order))
	for _, h := range order {
		for t := range h.terms {
			h.score += math.Log(1 + n/float64(df[t]))
		}
		h.score += 0.1 * math.Log(1+float64(len(h.lines)))
		slices.SortStableFunc(h.lines, func(x, y sandbox.GrepMatch) int {
			return cmp.Compare(len(lineTerms(y.Text)), len(lineTerms(x.Text)))
		})
		h.lines = h.lines[:min(len(h.lines), searchLinesShown)]
		slices.SortFunc(h.lines, func(x, y sandbox.GrepMatch) int { return cmp.Compare(x.Line, y.Line) })
	}
	out := make([]searchHit, len(order))
	for i, h := range order {
		out[i] = *h
	}
	slices.SortStableFunc(out, func(x, y searchHit) int {
		if c := cmp.Compare(y.score, x.score); c != 0 {
			return c
		}
		return cmp.Compare(x.path, y.path)
	})
	return out
}
