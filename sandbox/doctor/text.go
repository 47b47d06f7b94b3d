package doctor

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes the report as a short table, then its problems and
// warnings.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	if r.Reachable {
		row("engine", "Docker %s, API %s (min %s), client speaks %s", r.EngineVersion, r.APIVersion, r.MinAPIVersion, r.NegotiatedAPIVersion)
		row("host", "%s, kernel %s, %d CPUs, %d MiB", r.OS, r.Kernel, r.NCPU, r.MemTotal>>20)
		row("cgroups", "v%s (%s driver)", r.CgroupVersion, r.CgroupDriver)
		row("limits", "memory %s, swap %s, pids %s, cpu %s", yes(r.MemoryLimit), yes(r.SwapLimit), yes(r.PidsLimit), yes(r.CPUQuota))
		rt := "default"
		if r.Runtime != "" {
			rt = r.Runtime
		}
		row("runtimes", "%s (default %s); runsc %s; configured: %s", strings.Join(r.Runtimes, ", "), r.DefaultRuntime, installed(r.Runsc), rt)
		row("security", "seccomp %s, apparmor %s, selinux %s, userns-remap %s, rootless %s",
			yes(r.Seccomp), yes(r.AppArmor), yes(r.SELinux), yes(r.UserNS), yes(r.Rootless))
		switch {
		case !r.Image.Present:
			row("image", "%s: missing", r.Image.Tag)
		case r.Image.Current:
			row("image", "%s: present, %d MB, current recipe", r.Image.Tag, r.Image.Size/1e6)
		default:
			row("image", "%s: present, %d MB", r.Image.Tag, r.Image.Size/1e6)
		}
	} else {
		row("engine", "unreachable")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range r.Problems {
		fmt.Fprintf(w, "PROBLEM %s: %s\n", f.Check, f.Message)
		if f.Fix != "" {
			fmt.Fprintf(w, "  fix: %s\n", f.Fix)
		}
	}
	for _, f := range r.Warnings {
		fmt.Fprintf(w, "warning %s: %s\n", f.Check, f.Message)
		if f.Fix != "" {
			fmt.Fprintf(w, "  fix: %s\n", f.Fix)
		}
	}
	var err error
	if r.OK() {
		_, err = fmt.Fprintln(w, "ok: this engine can run Wrench sandboxes")
	} else {
		_, err = fmt.Fprintf(w, "%d problem(s): Wrench cannot run sandboxes as configured\n", len(r.Problems))
	}
	return err
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func installed(b bool) string {
	if b {
		return "installed"
	}
	return "not installed"
}
