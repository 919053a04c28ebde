package remotestorage

// The in-memory answers of FirstSegmentForTimestamp and EpochEndOffset,
// shared by InMemoryManager and PgManager's cache.

// firstForTimestamp returns the first finished segment carrying epoch, in
// list order, whose MaxTimestampMs >= timestampMs and EndOffset >=
// startingOffset; nil when there is none.
func (p *memPartition) firstForTimestamp(epoch LeaderEpoch, timestampMs, startingOffset int64) *memSegment {
	for _, s := range p.currentIndex().listed {
		if s.state != CopySegmentFinished || s.end < startingOffset || s.maxTimestampMs < timestampMs {
			continue
		}
		if s.carries(epoch) {
			return s
		}
	}
	return nil
}

// raiseEpochEnds raises the partition's epoch high-water marks to the ends of
// the epoch ranges of s, a segment reaching COPY_SEGMENT_FINISHED. Nothing
// lowers them; DELETE_PARTITION_FINISHED hides them (epochEnd).
func (p *memPartition) raiseEpochEnds(s *memSegment) {
	s.epochRanges(func(e LeaderEpoch, _, last int64) { p.raiseEpochEnd(e, last) })
}

// raiseEpochEnd raises epoch's high-water mark to end.
func (p *memPartition) raiseEpochEnd(epoch LeaderEpoch, end int64) {
	if p.epochEnds == nil {
		p.epochEnds = make(map[LeaderEpoch]int64)
	}
	if old, ok := p.epochEnds[epoch]; !ok || end > old {
		p.epochEnds[epoch] = end
	}
}

// epochEnd returns the largest offset of epoch in any segment of the
// partition that reached COPY_SEGMENT_FINISHED, deleted since or not; none
// once the partition's delete finished.
func (p *memPartition) epochEnd(epoch LeaderEpoch) (int64, bool) {
	if p == nil || p.deleteState == DeletePartitionFinished {
		return 0, false
	}
	end, ok := p.epochEnds[epoch]
	return end, ok
}
