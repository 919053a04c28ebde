package promnames

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNames(t *testing.T) {
	names, err := Names(`sum by (job) (rate(b_total{x="1"}[5m])) / on (job) a or {__name__="c"} unless absent(b_total)`)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b_total", "c"}, names)

	_, err = Names(`sum(rate(a[5m])`)
	require.Error(t, err, "does not parse")
	_, err = Names(`{__name__=~"rlmm_.*"}`)
	require.ErrorContains(t, err, "names no metric")
}

func TestGrafanaExpr(t *testing.T) {
	require.Equal(t, `rate(a{instance=~"x"}[5m])`, grafanaExpr(`rate(a{instance=~"$instance"}[$__rate_interval])`))
	require.Equal(t, `rate(a{ds="x"}[5m])`, grafanaExpr(`rate(a{ds="${datasource}"}[${__interval}])`))
}

func TestAnchor(t *testing.T) {
	require.Equal(t, "rlmmddown", Anchor("RlmmdDown"))
	require.Equal(t, "the-operators-kit", Anchor("The operators' kit"))
	require.Equal(t, "rlmmd-flags-and-environment", Anchor("rlmmd flags and environment"))
}
