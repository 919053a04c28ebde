package bench_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
)

// FirstSegmentForTimestamp next to what Kafka's broker does today
// (KAFKA-15802: ListRemoteLogSegmentsByEpoch, then a filter in Go) and a raw
// primary-key SELECT of an equally wide segment row, on epochs of 1k and 10k
// finished segments (segment i holds offsets 100i..100i+89 and has
// MaxTimestampMs 1000i; see rstest.LoadEpoch):
//
//	go test -run '^$' -bench 'FirstSegmentForTimestamp' -benchtime 2s -count 3 ./bench
//
// Rows: the answer near the start of the epoch, in the middle, at the end,
// each asked from startingOffset 0 (ListOffsets from the log start: the
// statement walks the epoch up to the answer) and from just before the
// answer (the walk is short).
func BenchmarkFirstSegmentForTimestamp(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		dsn := pgtest.NewDatabase(b)
		pool := benchPool(b, dsn)
		tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "timestamps", Partition: 0}
		rstest.LoadEpoch(b, pool, tp, n)
		_, err := pool.Exec(b.Context(), "VACUUM ANALYZE rlmm_partitions, rlmm_segments, rlmm_segment_epochs, rlmm_epoch_ends")
		require.NoError(b, err)
		m, err := rs.NewPgManager(b.Context(), pool)
		require.NoError(b, err)
		answers := []struct {
			name  string
			index int64
		}{{"start", 1}, {"middle", int64(n / 2)}, {"end", int64(n - 1)}}
		for _, a := range answers {
			ts := a.index * 1000
			for _, from := range []struct {
				name   string
				offset int64
			}{{"from0", 0}, {"fromNear", a.index*100 - 50}} {
				b.Run(fmt.Sprintf("segments=%d/answer=%s/%s/FirstSegmentForTimestamp", n, a.name, from.name), func(b *testing.B) {
					for b.Loop() {
						s, ok, err := m.FirstSegmentForTimestamp(b.Context(), tp, 3, ts, from.offset)
						if err != nil || !ok || s.StartOffset != a.index*100 {
							b.Fatalf("got %d %v %v", s.StartOffset, ok, err)
						}
					}
				})
			}
			b.Run(fmt.Sprintf("segments=%d/answer=%s/from0/KafkaListThenFilter", n, a.name), func(b *testing.B) {
				for b.Loop() {
					list, err := m.ListRemoteLogSegmentsByEpoch(b.Context(), tp, 3)
					if err != nil {
						b.Fatal(err)
					}
					var found *rs.RemoteLogSegmentMetadata
					for i := range list {
						if list[i].State == rs.CopySegmentFinished && list[i].MaxTimestampMs >= ts && list[i].EndOffset >= 0 {
							found = &list[i]
							break
						}
					}
					if found == nil || found.StartOffset != a.index*100 {
						b.Fatal("Kafka's filter found the wrong segment")
					}
				}
			})
		}
		var id uuid.UUID
		require.NoError(b, pool.QueryRow(b.Context(), "SELECT segment_id FROM rlmm_segments WHERE start_offset = 100").Scan(&id))
		b.Run(fmt.Sprintf("segments=%d/RawPrimaryKeySelect", n), func(b *testing.B) {
			for b.Loop() {
				err := rawPrimaryKeySelect(b.Context(), pool, tp, id)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
