package agent

import (
	"regexp"
	"strings"
)

// intentNudge answers a reply that announces an action without taking it.
const intentNudge = "Please do what you just described: make the tool call now instead of describing it. If the task is complete, call finish."

var intentPatterns = []*regexp.Regexp{
	regexp.MustCompile(`[:：]\s*$`),
	regexp.MustCompile(`(\.\.\.|…)\s*$`),
	regexp.MustCompile(`(?i)\blet me (first |now |also |quickly )?(start|check|look|fix|read|run|see|try|open|examine|view|search|find|update|edit|create|add|modify|implement|write|investigate|verify|test|inspect|explore|make|change|apply|rerun)\b`),
	regexp.MustCompile(`(?i)\b(I'll|I will|I'm going to|I am going to|I need to|Next,? I) (now |first |also )?(start|check|look|fix|read|run|see|try|open|examine|view|search|find|update|edit|create|add|modify|implement|write|investigate|verify|test|inspect|explore|make|change|apply|rerun)\b`),
	regexp.MustCompile(`让我(先|来|开始|查看|检查|修复|看看|运行)|我(将|来)(查看|检查|修复|运行|修改)`),
}

// incompleteIntent reports whether a reply without tool calls announces an
// action it did not take: it ends with a colon or an ellipsis,
// or its last lines say "let me …" / "I'll …".
func incompleteIntent(content string) bool {
	c := strings.TrimSpace(content)
	if c == "" {
		return false
	}
	// Only the end of the reply: a summary that mentioned "let me" early
	// on and then concluded is not an announcement.
	if len(c) > 400 {
		c = c[len(c)-400:]
	}
	for _, re := range intentPatterns {
		if re.MatchString(c) {
			return true
		}
	}
	return false
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }
