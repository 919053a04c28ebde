package remotestorage

import (
	"github.com/google/uuid"
)

const maxTopicNameLength = 249

// validTopicName reports whether name is a legal Kafka topic name.
func validTopicName(name string) bool {
	if len(name) == 0 || len(name) > maxTopicNameLength || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// validateTopicIDPartition checks the identity fields shared by every write.
func validateTopicIDPartition(sentinel error, what string, tp TopicIDPartition) error {
	if tp.TopicID == uuid.Nil {
		return newError(sentinel, "%s: topic id is the zero UUID", what)
	}
	if !validTopicName(tp.Topic) {
		return newError(sentinel, "%s: topic name %q is not a legal Kafka topic name (1-249 of [a-zA-Z0-9._-], not \".\" or \"..\")", what, tp.Topic)
	}
	if tp.Partition < 0 {
		return newError(sentinel, "%s: partition %d is negative", what, tp.Partition)
	}
	return nil
}

// validateAdd checks every rule of an add that does not need the store. Each
// failure wraps ErrInvalidAdd and names the field and the offending value.
func validateAdd(m RemoteLogSegmentMetadata, maxCustomMetadataBytes int) error {
	what := "segment " + m.SegmentID.ID.String()
	if m.State != CopySegmentStarted {
		return newError(ErrInvalidAdd, "%s: state is %s, must be %s", what, m.State, CopySegmentStarted)
	}
	if m.SegmentID.ID == uuid.Nil {
		return newError(ErrInvalidAdd, "%s: segment id is the zero UUID", what)
	}
	if err := validateTopicIDPartition(ErrInvalidAdd, what, m.SegmentID.TopicIDPartition); err != nil {
		return err
	}
	if m.StartOffset < 0 {
		return newError(ErrInvalidAdd, "%s: start offset %d is negative", what, m.StartOffset)
	}
	if m.EndOffset < m.StartOffset {
		return newError(ErrInvalidAdd, "%s: end offset %d is before start offset %d", what, m.EndOffset, m.StartOffset)
	}
	if len(m.SegmentLeaderEpochs) == 0 {
		return newError(ErrInvalidAdd, "%s: segment leader epochs are empty", what)
	}
	epochs := m.sortedEpochs()
	for i, e := range epochs {
		start := m.SegmentLeaderEpochs[e]
		if e < 0 {
			return newError(ErrInvalidAdd, "%s: epoch %d is negative", what, e)
		}
		if start < m.StartOffset || start > m.EndOffset {
			return newError(ErrInvalidAdd, "%s: epoch %d starts at %d, outside [%d, %d]", what, e, start, m.StartOffset, m.EndOffset)
		}
		if i > 0 {
			prev := epochs[i-1]
			if start <= m.SegmentLeaderEpochs[prev] {
				return newError(ErrInvalidAdd, "%s: epoch %d starts at %d, not after epoch %d's start %d", what, e, start, prev, m.SegmentLeaderEpochs[prev])
			}
		}
	}
	if m.SegmentSizeInBytes < 0 {
		return newError(ErrInvalidAdd, "%s: segment size %d bytes is negative", what, m.SegmentSizeInBytes)
	}
	if len(m.CustomMetadata) > maxCustomMetadataBytes {
		return newError(ErrInvalidAdd, "%s: custom metadata is %d bytes, more than the limit of %d", what, len(m.CustomMetadata), maxCustomMetadataBytes)
	}
	return nil
}

// validateUpdate checks what an update can be refused for without the
// store. The target state is checked first, before anything else.
func validateUpdate(u RemoteLogSegmentMetadataUpdate, maxCustomMetadataBytes int) error {
	what := "segment " + u.SegmentID.ID.String()
	if len(AllowedSegmentFromStates(u.State)) == 0 {
		return newError(ErrInvalidSegmentTransition, "%s: no segment may move to %s", what, u.State)
	}
	if len(u.CustomMetadata) > maxCustomMetadataBytes {
		return newError(ErrInvalidSegmentTransition, "%s: custom metadata is %d bytes, more than the limit of %d", what, len(u.CustomMetadata), maxCustomMetadataBytes)
	}
	return nil
}

// validatePartitionDelete checks a partition-delete record's fields.
func validatePartitionDelete(m RemotePartitionDeleteMetadata) error {
	what := "partition " + m.TopicIDPartition.String()
	if !m.State.Valid() {
		return newError(ErrInvalidPartitionDeleteTransition, "%s: %s is not a partition delete state", what, m.State)
	}
	return validateTopicIDPartition(ErrInvalidPartitionDeleteTransition, what, m.TopicIDPartition)
}
