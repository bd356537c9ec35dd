package postgres

import "github.com/jobboard/jobboard/internal/jobboard"

// pageLimit clamps a requested page size to 1..MaxPageSize, defaulting to
// DefaultPageSize.
func pageLimit(limit int) int {
	switch {
	case limit <= 0:
		return jobboard.DefaultPageSize
	case limit > jobboard.MaxPageSize:
		return jobboard.MaxPageSize
	}
	return limit
}

// pageOf cuts rows (fetched with one extra row) to a page of limit items and
// sets the cursor when more rows exist.
func pageOf[T any](rows []T, limit int, id func(T) int64) jobboard.Page[T] {
	page := jobboard.Page[T]{Items: rows}
	if page.Items == nil {
		page.Items = []T{}
	}
	if len(rows) > limit {
		page.Items = rows[:limit]
		page.NextAfter = id(page.Items[limit-1])
	}
	return page
}
