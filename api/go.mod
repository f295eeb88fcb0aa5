module github.com/kafkanet/kafkanet/api

go 1.26.0

// apidiff checks the library against the API it promised at v1.0.0; it is
// pinned here, in a module of its own, so that the library's importers never
// get it.
tool golang.org/x/exp/cmd/apidiff

require (
	github.com/kafkanet/kafkanet v0.0.0
	golang.org/x/mod v0.42.0
)

require (
	golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.1-0.20261106145633-d407941a339a // indirect
)

// Without the workspace (GOWORK=off), the library is this repository's.
replace github.com/kafkanet/kafkanet => ../
