// Package dbuuid is the UUID type of the generated queries (db,
// sqlc.yaml's override for uuid). It is github.com/google/uuid's UUID with
// pgx's own UUID interfaces instead of database/sql's: pgx encodes a
// uuid.UUID parameter through driver.Valuer, as a string it first fails to
// encode in binary (building the error with fmt.Errorf) and then parses
// back, for every parameter of every call; this type goes straight to the
// 16 bytes, and scans without a string either.
package dbuuid

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// UUID is a uuid.UUID as the generated queries pass and scan it.
type UUID uuid.UUID

// UUIDValue implements pgtype.UUIDValuer.
func (u UUID) UUIDValue() (pgtype.UUID, error) {
	return pgtype.UUID{Bytes: u, Valid: true}, nil
}

// ScanUUID implements pgtype.UUIDScanner. NULL (a view's column that sqlc
// cannot tell is nullable: rlmm_stuck_v's segment_id of a partition) scans
// as the zero id, as uuid.UUID's Scan does.
func (u *UUID) ScanUUID(v pgtype.UUID) error {
	*u = UUID(v.Bytes) // zero when !v.Valid
	return nil
}

// String returns the canonical form, as uuid.UUID does.
func (u UUID) String() string { return uuid.UUID(u).String() }
