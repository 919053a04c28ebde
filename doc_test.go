package remotestorage_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The library links only what it needs: the Prometheus client lives in
// package metrics, the CLI's cobra and any gRPC stay under cmd/.
func TestLibraryLinksNoMetricsOrCLI(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/prometheus/", "google.golang.org/grpc", "github.com/spf13/cobra"} {
			require.False(t, strings.HasPrefix(dep, banned), "package remotestorage depends on %s", dep)
		}
	}
}
