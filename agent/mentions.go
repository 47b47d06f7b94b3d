package agent

import (
	"context"
	"regexp"
	"strings"
)

// mentionPattern finds @path mentions in a task: an @ at the
// start or after a space or an opening bracket or quote, then a path. An
// e-mail address does not match (its @ follows a letter).
var mentionPattern = regexp.MustCompile(`(?:^|[\s(\[{"'\x60])@([\w.~/-]*[\w/])`)

// mentionedPaths returns the distinct paths a task @-mentions, in order.
func mentionedPaths(instruction string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range mentionPattern.FindAllStringSubmatch(instruction, -1) {
		p, err := cleanPath(m[1])
		if err != nil || p == "." || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	return out
}

// mentions reads the files and lists the directories a task @-mentions, so
// the first message already holds them and the model need not ask. A
// mention that names nothing in the workspace (a user handle, say) is left
// alone. A file shown whole counts as viewed for read-before-edit.
func (s *runState) mentions(ctx context.Context, instruction string) []Mention {
	var out []Mention
	for _, p := range mentionedPaths(instruction) {
		if len(out) == maxMentions {
			break
		}
		fi, err := s.r.Env.Stat(ctx, p)
		if err != nil {
			continue
		}
		if fi.IsDir {
			if res := (&ls{files: s.r.Env}).list(ctx, p); !res.isError && res.fatal == nil {
				out = append(out, Mention{Path: p, IsDir: true, Content: res.output})
			}
			continue
		}
		b, err := s.r.Env.ReadFile(ctx, p)
		if err != nil || strings.IndexByte(string(b), 0) >= 0 {
			continue
		}
		m := Mention{Path: p, Content: strings.TrimSuffix(string(b), "\n")}
		if len(b) > s.a.cfg.MaxOutputChars {
			m.Content, m.Truncated = cutHead(string(b), s.a.cfg.MaxOutputChars), true
		} else {
			s.seen.saw(p, b)
		}
		out = append(out, m)
	}
	if len(out) > 0 {
		s.logEvent("task mentions %d path(s); their content is in the first message", len(out))
	}
	return out
}
