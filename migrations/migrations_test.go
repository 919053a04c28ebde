package migrations_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/migrations"
)

// TestHash: pgtest names its template database "pgtest_tmpl_" + Hash(), so
// the hash must be stable and fit an unquoted identifier.
func TestHash(t *testing.T) {
	t.Parallel()
	h, err := migrations.Hash()
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f]{12}$`, h)
	again, err := migrations.Hash()
	require.NoError(t, err)
	require.Equal(t, h, again)
}
