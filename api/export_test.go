package api

// BodyBytesReserved is what the bodies being read hold of the budget
// (Config.MaxBodyBytesInFlight).
func BodyBytesReserved(s *Server) int { return s.bodies.inUse() }
