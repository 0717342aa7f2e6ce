# Conveniences for a person at a terminal; CI runs .ci/run.

IMAGE ?= curator:dev
# The release a build says it is (`curator version`): empty, a development
# build of the checkout's commit; `make build VERSION=v0.1.0` for a release.
VERSION ?=
COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.commit=$(COMMIT) $(if $(VERSION),-X main.version=$(VERSION))
# In a checkout Go records the commit's time and whether the tree had
# changes too, whatever GOFLAGS says.
BUILDFLAGS := $(if $(COMMIT),-buildvcs=true) -ldflags "$(LDFLAGS)"

# A static binary in bin/curator, stamped with its release and commit.
.PHONY: build
build:
	CGO_ENABLED=0 go build $(BUILDFLAGS) -o bin/curator ./cmd/curator
	bin/curator version

# The image's build context: the Dockerfile and the image's files under
# rootfs/, the static binaries (curator and the docker plugin) and an
# empty /tmp, nothing else (no image can
# be pulled to build the binary in).
IMAGE_CONTEXT := .build/image

.PHONY: image
image:
	rm -rf $(IMAGE_CONTEXT) && mkdir -p $(IMAGE_CONTEXT)/rootfs/tmp
	chmod 1777 $(IMAGE_CONTEXT)/rootfs/tmp
	CGO_ENABLED=0 go build $(BUILDFLAGS) -o $(IMAGE_CONTEXT)/rootfs/curator ./cmd/curator
	CGO_ENABLED=0 go build $(BUILDFLAGS) -o $(IMAGE_CONTEXT)/rootfs/usr/local/bin/curator-provider-docker ./cmd/curator-provider-docker
	cp provider/docker/Dockerfile $(IMAGE_CONTEXT)/
	docker build -t $(IMAGE) $(IMAGE_CONTEXT)
