package dispatch

import (
	"chute/dispatch/qlog"
	"chute/sink"
)

// regionReader reads the values of a batch's rows that are views of the
// queue log by pread from their segment files rather than through the
// mappings (qlog.Region.ReadViews says why): the sink reads a batch's
// body through it (sink.RowReader).
type regionReader struct {
	regions []*qlog.Region // the regions of the batch's rows, in order, each run once
	last    int            // the region that held the last row read
}

// newRegionReader returns a reader of the values of rows, nil when none
// is a view of the queue log.
func newRegionReader(rows []row) *regionReader {
	var rd regionReader
	for _, r := range rows {
		if reg := r.m.region; reg != nil && (len(rd.regions) == 0 || rd.regions[len(rd.regions)-1] != reg) {
			rd.regions = append(rd.regions, reg)
		}
	}
	if len(rd.regions) == 0 {
		return nil
	}
	return &rd
}

// ReadRows reads the longest prefix of rows that one region reads at once
// (qlog.Region.ReadViews); none when rows[0] is not a view of the queue
// log. Rows come in the batch's order, so their region is the last one
// or the next, where the search starts.
func (rd *regionReader) ReadRows(buf []byte, rows, views [][]byte) [][]byte {
	if len(rows) == 0 {
		return views
	}
	for k := range rd.regions {
		i := (rd.last + k) % len(rd.regions)
		if rd.regions[i].Contains(rows[0]) {
			rd.last = i
			return rd.regions[i].ReadViews(buf, rows, views)
		}
	}
	return views
}

// rowReader returns rd as a sink.RowReader: nil (rows from memory) when
// rd is nil.
func (rd *regionReader) rowReader() sink.RowReader {
	if rd == nil {
		return nil
	}
	return rd
}
