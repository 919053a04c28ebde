//go:build opskit

package deploy_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/krabka/remotestorage/internal/pgtest"
)

const (
	unitFile = "systemd/rlmmd.service"
	envFile  = "systemd/rlmmd.env"
)

// unit is the [Service] section of a unit file: each key's values in order.
func unit(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(unitFile)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "%s: %q", unitFile, line)
			out[k] = append(out[k], v)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func one(t *testing.T, u map[string][]string, key string) string {
	t.Helper()
	require.Len(t, u[key], 1, "%s: one %s=", unitFile, key)
	return u[key][0]
}

// environmentFile reads an EnvironmentFile as systemd does for what ours
// holds: KEY=VALUE lines, comments and blank lines skipped.
func environmentFile(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: %q", path, line)
		require.NotContains(t, v, `"`, "%s: %s: no quoting (this reader does not undo it)", path, k)
		out[k] = v
	}
	return out
}

var unitVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// execStart is the unit's ExecStart as systemd runs it with env: split on
// spaces (ours quotes nothing), ${VAR} replaced by its value.
func execStart(t *testing.T, u map[string][]string, env map[string]string) []string {
	t.Helper()
	line := one(t, u, "ExecStart")
	require.NotContains(t, line, `"`)
	var argv []string
	for _, w := range strings.Fields(line) {
		argv = append(argv, unitVar.ReplaceAllStringFunc(w, func(ref string) string {
			name := unitVar.FindStringSubmatch(ref)[1]
			v, ok := env[name]
			require.True(t, ok, "ExecStart uses ${%s}, which the unit's environment lacks", name)
			return v
		}))
	}
	return argv
}

// TestSystemdUnitVerifies: systemd-analyze verify passes on the unit, in a
// root that holds it, its environment file and rlmmd where the unit says,
// and fails there without the binary; its sandbox scores as exposed at
// most 2.0 of 10 by systemd-analyze security (--threshold counts in tenths); and it has what the kit
// promises (a dynamic user, the sandbox, restarts, the URL from the file).
func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	u := unit(t)
	for key, want := range map[string]string{
		"DynamicUser": "yes", "ProtectSystem": "strict", "NoNewPrivileges": "yes", "PrivateTmp": "yes",
		"Restart": "on-failure", "RuntimeDirectory": "rlmmd", "EnvironmentFile": "/etc/rlmmd/rlmmd.env",
		"RestartPreventExitStatus": "2",
	} {
		require.Equal(t, want, one(t, u, key), "%s: %s=", unitFile, key)
	}
	require.NotContains(t, one(t, u, "ExecStart"), "postgres", "the database URL is not on the command line")
	require.Contains(t, one(t, u, "ExecStart"), "--require-database-url")

	root := t.TempDir()
	binary := strings.Fields(one(t, u, "ExecStart"))[0]
	install := func(src, dst string, mode os.FileMode) {
		raw, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(dst)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, dst), raw, mode))
	}
	install(unitFile, "/etc/systemd/system/rlmmd.service", 0o644)
	install(envFile, one(t, u, "EnvironmentFile"), 0o640)
	install(rlmmdBinary(t), binary, 0o755)
	// The targets the unit names (network-online.target, multi-user.target)
	// are the machine's own.
	system := "/usr/lib/systemd/system"
	if _, err := os.Stat(filepath.Join(system, "sysinit.target")); err != nil {
		system = "/lib/systemd/system"
	}
	out, err := exec.Command("cp", "-r", system, filepath.Join(root, "usr/lib/systemd/")).CombinedOutput()
	if err != nil {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/lib/systemd"), 0o755))
		out, err = exec.Command("cp", "-r", system, filepath.Join(root, "usr/lib/systemd/")).CombinedOutput()
	}
	require.NoError(t, err, "%s", out)

	verify := func() (string, error) {
		out, err := exec.Command("systemd-analyze", "verify", "--root="+root, "/etc/systemd/system/rlmmd.service").CombinedOutput()
		return string(out), err
	}
	out2, err := verify()
	require.NoError(t, err, "systemd-analyze verify:\n%s", out2)
	out, err = exec.Command("systemd-analyze", "security", "--offline=true", "--threshold=20", "--root="+root, "/etc/systemd/system/rlmmd.service").CombinedOutput()
	require.NoError(t, err, "systemd-analyze security --threshold=20 (2.0 of 10):\n%s", out)
	require.Contains(t, string(out), "Overall exposure level for rlmmd.service")

	require.NoError(t, os.Remove(filepath.Join(root, binary)))
	out2, err = verify()
	require.Error(t, err, "verify checks the binary is there:\n%s", out2)
	require.Contains(t, out2, binary)
}

// unitEnv is the environment systemd gives the unit's ExecStart: the
// EnvironmentFile, with this test's database and a free metrics port, and
// RUNTIME_DIRECTORY, which RuntimeDirectory= sets.
func unitEnv(t *testing.T, runtimeDir string) map[string]string {
	t.Helper()
	env := environmentFile(t, envFile)
	require.Contains(t, env, "DATABASE_URL", "%s names the database", envFile)
	env["DATABASE_URL"] = pgtest.NewDatabase(t)
	env["RLMMD_METRICS_LISTEN"] = "127.0.0.1:0"
	env["RUNTIME_DIRECTORY"] = runtimeDir
	env["PATH"] = "/usr/bin:/bin"
	return env
}

// runUnit runs the unit's ExecStart with env, with the unit's UMask, and
// rlmmd built from this tree where the unit names the binary.
func runUnit(t *testing.T, env map[string]string) *process {
	t.Helper()
	u := unit(t)
	argv := execStart(t, u, env)
	argv[0] = rlmmdBinary(t)
	umask := one(t, u, "UMask")
	_, err := strconv.ParseUint(umask, 8, 32)
	require.NoError(t, err)
	return startProcess(t, append([]string{"/bin/sh", "-c", `umask "$0" && exec "$@"`, umask}, argv...), environ(env))
}

// TestSystemdUnitExecStart: the unit's ExecStart with its environment
// serves a broker's client on the unix socket in the runtime directory,
// which the group may use and others may not.
func TestSystemdUnitExecStart(t *testing.T) {
	t.Parallel()
	runtimeDir := t.TempDir()
	p := runUnit(t, unitEnv(t, runtimeDir))
	listen, _ := p.addresses(t)
	sock := filepath.Join(runtimeDir, "rlmmd.sock")
	require.Equal(t, sock, listen)
	b := dialRlmmd(t, "unix:"+sock)
	b.healthy(t)
	b.addAndReadBack(t)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.ModeSocket, fi.Mode().Type())
	require.Equal(t, os.FileMode(0o770), fi.Mode().Perm(), "the socket: the broker's group may connect, others not (UMask=)")

	resp, err := grpc_health_v1.NewHealthClient(b.conn).Check(callCtx(t), &grpc_health_v1.HealthCheckRequest{})
	require.NoError(t, err)
	require.Equal(t, grpc_health_v1.HealthCheckResponse_SERVING, resp.GetStatus())
}

// TestSystemdUnitWithoutDatabaseURL: an EnvironmentFile without
// DATABASE_URL: the ExecStart exits at once with rlmmd's error, and with
// the status RestartPreventExitStatus= names, so systemd does not restart
// it in a loop.
func TestSystemdUnitWithoutDatabaseURL(t *testing.T) {
	t.Parallel()
	env := unitEnv(t, t.TempDir())
	delete(env, "DATABASE_URL")
	env["PGHOST"] = "127.0.0.1" // the PG* fallback does not apply
	start := time.Now()
	p := runUnit(t, env)
	code, elapsed := p.exit(t, start)
	require.Equal(t, one(t, unit(t), "RestartPreventExitStatus"), strconv.Itoa(code), p.log.String())
	require.Contains(t, p.log.String(), "rlmmd: no database: --require-database-url is set")
	require.Less(t, elapsed, 10*time.Second, "at once")
}
