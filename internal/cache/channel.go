package cache

import (
	"errors"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/krabka/remotestorage/internal/partition"
)

// notifyChannel is the channel on which writes are announced, after they
// commit (notifier.go), with the payload "<topic id>/<partition>/<write
// order>": the write order (rlmm_versions) of the newest write announced,
// which tells a manager its own writes apart.
const notifyChannel = "rlmm_changes"

// resetNotificationPrefix starts the payload "reset/<generation>" that
// rlmm_resync() notifies when it moves the data's generation.
const resetNotificationPrefix = "reset/"

// parseNotification reads a partition's notification payload
// ("<topic id>/<partition>/<write order>"): the partition and the write
// order; false for any other payload.
func parseNotification(payload string) (partition.Key, int64, bool) {
	parts := strings.Split(payload, "/")
	if len(parts) != 3 {
		return partition.Key{}, 0, false
	}
	topicID, err1 := uuid.Parse(parts[0])
	number, err2 := strconv.ParseInt(parts[1], 10, 32)
	version, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return partition.Key{}, 0, false
	}
	return partition.Key{TopicID: topicID, Partition: int32(number)}, version, true
}

// notificationPayload is the payload announcing the write of k at write
// order version.
func notificationPayload(k partition.Key, version int64) string {
	return k.TopicID.String() + "/" + strconv.FormatInt(int64(k.Partition), 10) + "/" + strconv.FormatInt(version, 10)
}
