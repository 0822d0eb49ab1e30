module github.com/uncaged/workflow

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/oklog/ulid/v2 v2.1.2
	github.com/spf13/cobra v1.10.2
	golang.org/x/sys v0.50.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
