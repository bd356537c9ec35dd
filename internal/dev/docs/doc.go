// Package docs keeps the repository's documents honest: README.md, for
// users, and docs/, one file per audience. It has no code of its own; its
// tests check that every relative link (and #anchor) in them resolves, and
// that the README stays within its length.
package docs
