module nmo.maintenance/hack/real-node.d/pause

go 1.26.0
