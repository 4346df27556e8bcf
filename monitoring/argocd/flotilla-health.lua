-- Argo CD health check for Flotilla's kinds (KafkaCluster, ClientQuota, RecordDeletion; KafkaTopic
-- too). Install it in argocd-cm under resource.customizations.health.flotilla.io_<Kind>
-- (docs/operations.md). It reads only what the operator and the brokers write in status:
-- ReconciliationPaused -> Suspended; Stalled -> Degraded (the spec must change);
-- Ready=True -> Healthy; Degraded=True -> Degraded; anything else -> Progressing.
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the operator's first status"
  return hs
end
if obj.status.observedGeneration ~= nil and obj.metadata.generation ~= nil
    and obj.status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "the operator has not handled generation " .. obj.metadata.generation .. " yet"
  return hs
end
local c = {}
for _, condition in ipairs(obj.status.conditions) do
  c[condition.type] = condition
end
local function describe(condition)
  local text = condition.reason or condition.type
  if condition.message ~= nil and condition.message ~= "" then
    text = text .. ": " .. condition.message
  end
  return text
end
if c.ReconciliationPaused ~= nil and c.ReconciliationPaused.status == "True" then
  hs.status = "Suspended"
  hs.message = describe(c.ReconciliationPaused)
  return hs
end
if c.Stalled ~= nil and c.Stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(c.Stalled)
  return hs
end
if c.Ready ~= nil and c.Ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(c.Ready)
  return hs
end
if c.Degraded ~= nil and c.Degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(c.Degraded)
  return hs
end
hs.status = "Progressing"
if c.Ready ~= nil then
  hs.message = describe(c.Ready)
else
  hs.message = "no Ready condition yet"
end
return hs
