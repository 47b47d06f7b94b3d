package github

import (
	"context"
	"fmt"
	"strings"
)

// AppCheck is what [CheckApp] found: the App, each installation's missing
// permissions, and the problems to fix.
type AppCheck struct {
	App           AppInfo             `json:"app"`
	Installations []InstallationCheck `json:"installations"`
	Problems      []AppProblem        `json:"problems"`
}

// InstallationCheck is one installation and what it lacks of [Needed].
type InstallationCheck struct {
	ID      int64        `json:"id"`
	Account string       `json:"account"`
	Missing []Permission `json:"missing,omitempty"`
}

// AppProblem is one thing that keeps Wrench from working through the App.
type AppProblem struct {
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// OK reports whether no problem was found.
func (c AppCheck) OK() bool { return len(c.Problems) == 0 }

// Summary is one line: the App and its installations.
func (c AppCheck) Summary() string {
	var accts []string
	for _, in := range c.Installations {
		s := in.Account
		if len(in.Missing) > 0 {
			s += " (missing " + permNames(in.Missing) + ")"
		}
		accts = append(accts, s)
	}
	where := "installed nowhere"
	if len(accts) > 0 {
		where = "installed on " + strings.Join(accts, ", ")
	}
	return fmt.Sprintf("App %s (id %d), %s", c.App.Slug, c.App.ID, where)
}

// CheckApp checks that the App authenticates, that it asks for the
// permissions Wrench needs (contents, pull requests and issues, each
// read and write), and that every installation has granted them; each
// problem names the missing permission and where to grant it.
func CheckApp(ctx context.Context, a *App) AppCheck {
	var c AppCheck
	info, err := a.Info(ctx)
	if err != nil {
		c.Problems = append(c.Problems, AppProblem{Message: "cannot authenticate as the GitHub App: " + err.Error(),
			Fix: "check the App id and that the private key is the App's current one (App settings, Private keys)"})
		return c
	}
	c.App = info
	for _, p := range MissingPermissions(info.Permissions) {
		c.Problems = append(c.Problems, AppProblem{
			Message: fmt.Sprintf("the App does not ask for %s permission %q (has %s), needed to %s", p.Level, p.Name, orNone(info.Permissions[p.Name]), p.For),
			Fix:     fmt.Sprintf("App settings, Permissions & events, Repository permissions: set %s, then accept the change on each installation", permissionTitle(p.Name, p.Level)),
		})
	}
	ins, err := a.Installations(ctx)
	if err != nil {
		c.Problems = append(c.Problems, AppProblem{Message: "cannot list the App's installations: " + err.Error(), Fix: "check the API URL and the network"})
		return c
	}
	if len(ins) == 0 {
		c.Problems = append(c.Problems, AppProblem{Message: "the App is installed nowhere", Fix: "install it on the repositories Wrench works on (App settings, Install App)"})
	}
	for _, in := range ins {
		ic := InstallationCheck{ID: in.ID, Account: in.Account.Login, Missing: MissingPermissions(in.Permissions)}
		c.Installations = append(c.Installations, ic)
		for _, p := range ic.Missing {
			c.Problems = append(c.Problems, AppProblem{
				Message: fmt.Sprintf("the installation on %s lacks %s permission %q (has %s), needed to %s", ic.Account, p.Level, p.Name, orNone(in.Permissions[p.Name]), p.For),
				Fix:     fmt.Sprintf("%s must accept the App's requested permissions (Settings, GitHub Apps, Configure), or the App must ask for %s", ic.Account, permissionTitle(p.Name, p.Level)),
			})
		}
	}
	return c
}

func permNames(ps []Permission) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Name+": "+p.Level)
	}
	return strings.Join(s, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
