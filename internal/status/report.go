package status

import "github.com/rmqtopo/rmqtopo/internal/statusdata"

// The Report and its parts are plain data in internal/statusdata, which
// render imports without the broker; these are the same types and names.

type (
	Report          = statusdata.Report
	WorkQueueStatus = statusdata.WorkQueueStatus
	QueueStatus     = statusdata.QueueStatus
	DriftItem       = statusdata.DriftItem
	DrainingQueue   = statusdata.DrainingQueue
	Summary         = statusdata.Summary
)

// Roles of a queue in a work queue's retry topology (statusdata's).
const (
	RoleWork       = statusdata.RoleWork
	RoleWait       = statusdata.RoleWait
	RoleDLQ        = statusdata.RoleDLQ
	RoleParkingLot = statusdata.RoleParkingLot
	RoleMigration  = statusdata.RoleMigration
	RoleReturn     = statusdata.RoleReturn
)

// Flags status raises on a queue (statusdata's).
const (
	FlagDLQNotEmpty     = statusdata.FlagDLQNotEmpty
	FlagNoConsumers     = statusdata.FlagNoConsumers
	FlagMissing         = statusdata.FlagMissing
	FlagDrift           = statusdata.FlagDrift
	FlagMigrating       = statusdata.FlagMigrating
	FlagHeld            = statusdata.FlagHeld
	FlagStuck           = statusdata.FlagStuck
	FlagReturnNotServed = statusdata.FlagReturnNotServed
	FlagDraining        = statusdata.FlagDraining
)

// FormatVersion is the version of Report's JSON form.
const FormatVersion = statusdata.FormatVersion
