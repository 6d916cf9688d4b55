package broker

// ReadFromExport makes c read every vhost from its definitions export,
// whatever the release; ReadFromListings from its listings.
func ReadFromExport(c *Client)   { c.forceExport = true }
func ReadFromListings(c *Client) { c.exportRefused.Store(true) }
