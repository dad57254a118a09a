// Module release builds goreleaser, which checks and runs the release configurations.
module github.com/kubewin/kubewin/tools/release

go 1.26.1

require github.com/goreleaser/goreleaser/v2 v2.15.0
