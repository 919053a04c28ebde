package main

import (
	"context"
	"strings"
	"testing"

	"github.com/krabka/remotestorage/db"
)

// TestWithoutNotify checks that the rewrite of the proposal ops removes the
// notification from the library's write statements and nothing else.
func TestWithoutNotify(t *testing.T) {
	for name, call := range map[string]func(db.DBTX){
		"SegmentAdd":    func(d db.DBTX) { _, _ = db.New().SegmentAdd(context.Background(), d, db.SegmentAddParams{}) },
		"SegmentUpdate": func(d db.DBTX) { _, _ = db.New().SegmentUpdate(context.Background(), d, db.SegmentUpdateParams{}) },
	} {
		sql := probeSQL(call)
		if !strings.Contains(sql, "pg_notify") {
			t.Skipf("%s sends no notification any more", name)
		}
		out := withoutNotify(sql)
		if strings.Contains(out, "pg_notify") || strings.Contains(out, "notification") {
			t.Errorf("%s still notifies:\n%s", name, out)
		}
		if strings.Count(out, "(") != strings.Count(out, ")") {
			t.Errorf("%s: unbalanced parentheses:\n%s", name, out)
		}
		t.Logf("%s without notify:\n%s", name, out[strings.LastIndex(out, "SELECT"):])
	}
}
