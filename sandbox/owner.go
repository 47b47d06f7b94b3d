package sandbox

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"
)

// LabelOwnerStart is put beside LabelOwnerPID and LabelOwnerHost: the
// creating process's start time in clock ticks after boot (field 22 of
// /proc/<pid>/stat). Pid, start and host together name a process even
// after its pid is reused; absent where the system does not tell.
const LabelOwnerStart = "dev.wrench.owner-start"

// ProcStat is what /proc/<pid>/stat says of a process.
type ProcStat struct {
	// State is the state letter (R, S, D, Z for a zombie, X for dead, …).
	State byte
	// Start is the start time in clock ticks after boot.
	Start uint64
}

// ReadProcStat reads /proc/<pid>/stat (pid 0 reads this process's). It
// fails where there is no such file: the process is gone, or the system
// has no /proc.
func ReadProcStat(pid int) (ProcStat, error) {
	name := "self"
	if pid != 0 {
		name = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + name + "/stat")
	if err != nil {
		return ProcStat{}, err
	}
	return parseProcStat(b)
}

// parseProcStat parses a /proc/<pid>/stat line. The command name (field 2)
// is in parentheses and may hold spaces and parentheses: the fields after
// it start after the last ')'.
func parseProcStat(b []byte) (ProcStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ProcStat{}, errors.New("proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 (starttime) is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return ProcStat{}, errors.New("proc stat: too few fields")
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return ProcStat{}, errors.New("proc stat: bad start time")
	}
	return ProcStat{State: f[0][0], Start: start}, nil
}

// ResourceLabels are the labels of a container or workspace that this
// process (owner, its [OwnerLabels]) makes now for taskID in deployment:
// what the reaper reads to tell whose it is and how old.
func ResourceLabels(deployment, taskID string, owner map[string]string) map[string]string {
	l := map[string]string{
		LabelManaged:    "true",
		LabelDeployment: deployment,
		LabelTask:       taskID,
		LabelCreated:    time.Now().UTC().Format(time.RFC3339Nano),
	}
	maps.Copy(l, owner)
	return l
}

// OwnerLabels are the labels that name this process as a resource's owner:
// its pid, host and start time (when the system tells).
func OwnerLabels(host string) map[string]string {
	l := map[string]string{LabelOwnerPID: strconv.Itoa(os.Getpid()), LabelOwnerHost: host}
	if st, err := ReadProcStat(0); err == nil {
		l[LabelOwnerStart] = strconv.FormatUint(st.Start, 10)
	}
	return l
}
