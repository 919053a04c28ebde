-- name: SegmentListPage :many
-- A page of SegmentList for the streaming iterators (iter.go): the next
-- @page_size segments after the cursor (@after_start_offset,
-- @after_added_version) in list order, read through rlmm_segments_list_idx.
-- The cursor is the last row of the previous page, (-1, -1) for the first.
-- The list key (start_offset, added_version) is unique in a partition and
-- never changes, so pages neither repeat nor skip a segment that stays
-- visible.
SELECT sqlc.embed(s)
FROM rlmm_segments s
WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
  AND s.state IN (0, 1, 2)
  AND (s.start_offset, s.added_version) > (@after_start_offset::bigint, @after_added_version::bigint)
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2)
ORDER BY s.start_offset, s.added_version
LIMIT @page_size::integer;

-- name: SegmentListByEpochPage :many
-- SegmentListPage restricted to the segments carrying @epoch, read through
-- rlmm_segment_epochs_list_idx.
SELECT sqlc.embed(s)
FROM rlmm_segment_epochs e
JOIN rlmm_segments s ON s.topic_id = e.topic_id AND s.partition = e.partition AND s.segment_id = e.segment_id
WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.epoch = @epoch::integer
  AND e.state IN (0, 1, 2)
  AND (e.segment_start_offset, e.added_version) > (@after_start_offset::bigint, @after_added_version::bigint)
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2)
ORDER BY e.segment_start_offset, e.added_version
LIMIT @page_size::integer;
