# Conveniences for a person at a terminal; CI runs .ci/run.

IMAGE ?= curator:dev
# The image's build context: the Dockerfile and the static binary, nothing
# else (no image can be pulled to build the binary in).
IMAGE_CONTEXT := .build/image

.PHONY: image
image:
	rm -rf $(IMAGE_CONTEXT) && mkdir -p $(IMAGE_CONTEXT)
	CGO_ENABLED=0 go build -o $(IMAGE_CONTEXT)/curator ./cmd/curator
	cp provider/docker/Dockerfile $(IMAGE_CONTEXT)/
	docker build -t $(IMAGE) $(IMAGE_CONTEXT)
