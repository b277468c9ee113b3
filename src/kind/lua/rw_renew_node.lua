-- RW_RENEW_NODE  RENEW_NODE's arguments (renew_node.lua), for a Cluster node.

-- #include rw_renew
-- #include renew_node_loop
