package remotestorage

// purge.go: purging what is forgotten. A segment in DELETE_SEGMENT_FINISHED,
// or any segment of a partition in DELETE_PARTITION_FINISHED, is forgotten:
// no query returns it, but its row keeps its id taken. Once it has been
// forgotten for the retention, the purge deletes it with all it stored (its
// epoch rows), and a partition whose delete finished that long ago loses its
// delete record (adds work again). Each PgManager purges in the background;
// PurgeForgotten does the same on demand (rlmmctl purge uses it). This file
// holds what both managers' purges share; each manager's PurgeForgotten is
// in its own file, and PgManager's background purge in purger.go.

import (
	"fmt"
	"time"
)

// DefaultForgottenRetention is how long a forgotten segment is kept before
// the background purge deletes it, when WithForgottenRetention is not given.
const DefaultForgottenRetention = 7 * 24 * time.Hour

// DefaultPurgeBatchSize is how many segments one purge transaction deletes
// at most, when WithPurgeBatchSize is not given. A batch of segments in one
// partition holds that partition's row for the batch (about 10 ms for 256
// segments here), so a broker's write to it can wait that long.
const DefaultPurgeBatchSize = 256

// negativeAge is the error of PurgeForgotten for a negative olderThan.
func negativeAge(olderThan time.Duration) error {
	return fmt.Errorf("remotestorage: PurgeForgotten: olderThan %s is negative: want 0 or more", olderThan)
}
